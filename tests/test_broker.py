"""The test broker: permit-bounded dispatch, redelivery, and the real client talking to it."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pulsar
import pytest

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from tests.broker import Broker, BrokerConfig
from tests.broker.topics import Consumer, Entry, Subscription, Topic
from tests.broker.wire import build_frame, command_of, parse_frame

EXCLUSIVE, SHARED = 0, 1


@dataclass
class Deliveries:
    """Collects what the subscription hands to consumers: (consumer, entry, redelivery)."""

    seen: list[tuple[str, int, int]] = field(default_factory=list)

    def __call__(self, consumer: Consumer, entry: Entry, redelivery_count: int) -> None:
        self.seen.append((consumer.name, entry.entry_id, redelivery_count))


def topic_with(*batch_sizes: int) -> Topic:
    topic = Topic("t", ledger_id=7)
    for size in batch_sizes:
        topic.append(size, b"", now_ms=0)
    return topic


def test_an_entry_waits_until_the_consumer_has_permits_for_all_its_messages() -> None:
    topic = topic_with(1, 5, 1)
    deliveries = Deliveries()
    subscription = Subscription(topic, "s", EXCLUSIVE)
    consumer = Consumer(1, "c", deliveries)
    subscription.add(consumer)
    subscription.flow(consumer, 3)
    assert deliveries.seen == [("c", 0, 0)]
    assert consumer.permits == 2
    subscription.flow(consumer, 4)
    assert deliveries.seen == [("c", 0, 0), ("c", 1, 0), ("c", 2, 0)]
    assert consumer.permits == 0


def test_shared_subscription_spreads_entries_over_consumers_with_permits() -> None:
    topic = topic_with(1, 1, 1, 1)
    deliveries = Deliveries()
    subscription = Subscription(topic, "s", SHARED)
    first, second = Consumer(1, "a", deliveries), Consumer(2, "b", deliveries)
    subscription.add(first)
    subscription.add(second)
    subscription.flow(first, 1)
    subscription.flow(second, 5)
    names = [name for name, _, _ in deliveries.seen]
    assert names.count("a") == 1 and names.count("b") == 3


def test_redelivery_by_id_and_of_everything_counts_each_dispatch() -> None:
    topic = topic_with(1, 1, 1)
    deliveries = Deliveries()
    subscription = Subscription(topic, "s", SHARED)
    consumer = Consumer(1, "c", deliveries)
    subscription.add(consumer)
    subscription.flow(consumer, 10)
    subscription.ack([_id(0)], cumulative=False)
    subscription.redeliver(consumer, [1])
    assert deliveries.seen[-1] == ("c", 1, 1)
    subscription.redeliver(consumer, None)
    assert sorted(deliveries.seen[-2:]) == [("c", 1, 2), ("c", 2, 1)]


def test_a_closed_consumers_unacked_entries_go_to_the_next_consumer() -> None:
    topic = topic_with(1, 1)
    deliveries = Deliveries()
    subscription = Subscription(topic, "s", SHARED)
    leaving, staying = Consumer(1, "leaving", deliveries), Consumer(2, "staying", deliveries)
    subscription.add(leaving)
    subscription.flow(leaving, 2)
    subscription.add(staying)
    subscription.remove(leaving)
    subscription.flow(staying, 2)
    assert deliveries.seen[-2:] == [("staying", 0, 1), ("staying", 1, 1)]


def test_cumulative_ack_covers_every_earlier_entry() -> None:
    topic = topic_with(1, 1, 1)
    subscription = Subscription(topic, "s", EXCLUSIVE)
    consumer = Consumer(1, "c", Deliveries())
    subscription.add(consumer)
    subscription.flow(consumer, 3)
    subscription.ack([_id(1)], cumulative=True)
    assert set(subscription.pending) == {2}


def _id(entry_id: int):

    return pb.MessageIdData(ledgerId=7, entryId=entry_id)


# ---- the official client against the broker ------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_broker(tmp_path: Path, **options: object) -> Iterator[BrokerConfig]:
    """The broker on its own event loop thread, for the length of the block."""
    config = BrokerConfig(port=free_port(), journal=tmp_path / "journal.jsonl", **options)
    loop = asyncio.new_event_loop()
    broker = Broker(config)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(5)
    try:
        yield config
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)


@contextmanager
def client(config: BrokerConfig) -> Iterator[pulsar.Client]:
    logger = logging.getLogger("pulsar-client-tests")
    logger.setLevel(logging.WARNING)
    connection = pulsar.Client(config.service_url, operation_timeout_seconds=10, logger=logger)
    try:
        yield connection
    finally:
        connection.close()


def journal(config: BrokerConfig) -> list[dict]:
    assert config.journal is not None
    return [json.loads(line) for line in config.journal.read_text().splitlines()]


@pytest.mark.parametrize("entry_metadata", [False, True])
def test_real_client_gets_every_batched_message_back(tmp_path: Path, entry_metadata: bool) -> None:
    with running_broker(tmp_path, entry_metadata=entry_metadata) as config, client(config) as c:
        consumer = c.subscribe("t", "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c.create_producer(
            "t", batching_enabled=True, batching_max_messages=4, batching_max_publish_delay_ms=500
        )
        for i in range(12):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        received = [consumer.receive(5000).data() for _ in range(12)]
        consumer.close()
    assert sorted(received) == sorted(f"m{i}".encode() for i in range(12))
    rows = journal(config)
    sends = [r for r in rows if r["cmd"] == "SEND"]
    assert sum(r["num_messages"] for r in sends) == 12
    messages = [r for r in rows if r["cmd"] == "MESSAGE"]
    assert all(r["checksum"] == "ok" for r in sends + messages)
    assert all(("broker_index" in r) is entry_metadata for r in messages)


def test_real_client_seek_last_message_id_and_unsubscribe(tmp_path: Path) -> None:
    with running_broker(tmp_path) as config, client(config) as c:
        consumer = c.subscribe("t", "s", initial_position=pulsar.InitialPosition.Earliest)
        producer = c.create_producer("t", batching_enabled=False)
        ids = [producer.send(f"m{i}".encode()) for i in range(3)]
        for _ in range(3):
            consumer.acknowledge(consumer.receive(5000))
        last = consumer.get_last_message_id()
        time.sleep(0.3)  # grouped acks out before the seek
        consumer.seek(pulsar.MessageId.earliest)
        again = [consumer.receive(5000).data() for _ in range(3)]
        consumer.unsubscribe()
    assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
    assert again == [b"m0", b"m1", b"m2"]
    commands = {r["cmd"] for r in journal(config)}
    assert {"SEEK", "GET_LAST_MESSAGE_ID_RESPONSE", "UNSUBSCRIBE"} <= commands


def test_broker_answers_client_ping_and_pings_itself(tmp_path: Path) -> None:
    with running_broker(tmp_path, ping_interval=0.2) as config, client(config) as c:
        c.create_producer("t")
        time.sleep(0.7)
    rows = journal(config)
    pings = [r for r in rows if r["cmd"] == "PING" and r["dir"] == "b2c"]
    pongs = [r for r in rows if r["cmd"] == "PONG" and r["dir"] == "c2b"]
    assert len(pings) >= 2 and len(pongs) >= 2


@pytest.mark.parametrize(
    "consumer_type",
    [
        pulsar.ConsumerType.Exclusive,
        pulsar.ConsumerType.Shared,
        pulsar.ConsumerType.Failover,
        pulsar.ConsumerType.KeyShared,
    ],
)
def test_every_subscription_type_delivers(tmp_path: Path, consumer_type: int) -> None:
    with running_broker(tmp_path) as config, client(config) as c:
        consumer = c.subscribe(
            "t", "s", consumer_type=consumer_type, initial_position=pulsar.InitialPosition.Earliest
        )
        producer = c.create_producer("t", batching_enabled=False)
        for i in range(5):
            producer.send(f"m{i}".encode(), partition_key=f"k{i}")
        received = {consumer.receive(5000).data() for _ in range(5)}
    assert received == {f"m{i}".encode() for i in range(5)}
    subscribe = next(r for r in journal(config) if r["cmd"] == "SUBSCRIBE")
    assert subscribe.get("sub_type", 0) == int(consumer_type)


def test_ack_with_a_request_id_gets_an_ack_response(tmp_path: Path) -> None:
    """The Python client cannot ask for ack receipts, so this speaks the protocol by hand."""
    with (
        running_broker(tmp_path) as config,
        socket.create_connection(("127.0.0.1", config.port)) as s,
    ):
        s.sendall(
            build_frame(
                command_of(pb.BaseCommand.CONNECT, client_version="raw", protocol_version=21)
            )
        )
        assert read_command(s).type == pb.BaseCommand.CONNECTED
        ack = command_of(
            pb.BaseCommand.ACK, consumer_id=9, ack_type=pb.CommandAck.Individual, request_id=42
        )
        s.sendall(build_frame(ack))
        response = read_command(s)
    assert response.type == pb.BaseCommand.ACK_RESPONSE
    assert (response.ackResponse.consumer_id, response.ackResponse.request_id) == (9, 42)


def read_command(sock: socket.socket) -> pb.BaseCommand:
    size = int.from_bytes(receive_exactly(sock, 4), "big")
    return parse_frame(receive_exactly(sock, size)).command


def receive_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data
