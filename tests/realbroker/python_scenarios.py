"""The real-broker scenarios driven by the official Python client (its C++ core):
``python -m tests.realbroker.python_scenarios NAME SERVICE_URL ADMIN_URL TOPIC_PREFIX RECORD``.

Writes the client's record in the shape the Java and Go scenarios write it (the Python
corpus record, tests/corpus/record.py, with receive times, acks and the client's versions).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pulsar

from tests.corpus.record import ClientRecord, message_id_of, quiet_logger

NAMESPACE = "persistent://public/default"
RECEIVE_MS = 30_000  # a receive the scenario needs: long enough for a busy machine
DRAINED_MS = 2_000  # no message for this long: nothing more is coming


def now_us() -> int:
    return time.time_ns() // 1000


def payload(index: int, size: int = 100) -> bytes:
    return f"python-{index:05d}-".encode().ljust(size, b".")


@dataclass
class RealRecord(ClientRecord):
    """The corpus record, with when each message reached the application, the acks and
    the scenario's events."""

    acks: list[dict[str, object]] = field(default_factory=list)
    events: list[dict[str, object]] = field(default_factory=list)

    def received_message(
        self, consumer: pulsar.Consumer, message: pulsar.Message, action: str
    ) -> None:
        super().received_message(consumer, message, action)
        self.received[-1].update(
            publish_time_ms=message.publish_timestamp(),
            size=len(message.data()),
            receive_time_us=now_us(),
        )

    def ack(self, consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        """Acknowledge ``message`` individually and record it (received, then acked)."""
        self.received_message(consumer, message, "ack")
        consumer.acknowledge(message)
        self.acks.append(
            {
                "t_us": now_us(),
                "topic": message.topic_name(),
                "subscription": consumer.subscription_name(),
                "consumer_name": consumer.consumer_name(),
                "message_id": message_id_of(message.message_id()),
                "type": "individual",
            }
        )

    def nack(self, consumer: pulsar.Consumer, message: pulsar.Message) -> None:
        self.received_message(consumer, message, "nack")
        consumer.negative_acknowledge(message)

    def document(self) -> dict[str, object]:
        return {
            "client": "python",
            "client_library": "pulsar-client",
            "client_version": pulsar.__version__,
            "python_version": sys.version.split()[0],
            "sent": self.sent,
            "received": self.received,
            "acks": self.acks,
            "events": self.events,
        }


def drain_and_ack(consumer: pulsar.Consumer, record: RealRecord) -> None:
    """Ack every message until none has come for ``DRAINED_MS``."""
    while True:
        try:
            message = consumer.receive(timeout_millis=DRAINED_MS)
        except pulsar.Timeout:
            return
        record.ack(consumer, message)


def redelivery(client: pulsar.Client, prefix: str, record: RealRecord) -> None:
    """Batches of five on a Shared subscription with batch-index acknowledgement: one
    member of four is negatively acknowledged, the rest acked one by one, so the broker
    redelivers each such batch whole with an ack_set naming the members acked."""
    topic = f"{NAMESPACE}/{prefix}-batches"
    consumer = client.subscribe(
        topic,
        "py-redelivery-sub",
        consumer_type=pulsar.ConsumerType.Shared,
        consumer_name="py-redelivery-consumer",
        receiver_queue_size=10,
        negative_ack_redelivery_delay_ms=300,
        batch_index_ack_enabled=True,
    )
    producer = client.create_producer(
        topic,
        producer_name="py-redelivery-producer",
        batching_enabled=True,
        batching_max_messages=5,
        batching_max_publish_delay_ms=50,
    )
    for i in range(20):
        properties = {"scenario": "redelivery", "index": str(i)}
        record.send_async(producer, payload(i), i, key=f"key-{i % 3}", properties=properties)
    producer.flush()
    for _ in range(20):
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        if int(message.properties()["index"]) % 4 == 0:
            record.nack(consumer, message)
        else:
            record.ack(consumer, message)
    drain_and_ack(consumer, record)
    producer.close()
    consumer.close()


def slow_consumer(client: pulsar.Client, prefix: str, record: RealRecord) -> None:
    """A five-message receiver queue behind thirty waiting, 50 ms per message: the
    client's FLOWs refill the queue as the application drains it."""
    topic = f"{NAMESPACE}/{prefix}-slow"
    producer = client.create_producer(
        topic, producer_name="py-slow-producer", batching_enabled=False
    )
    for i in range(30):
        record.send(producer, payload(i), i, properties={"scenario": "slow", "index": str(i)})
    consumer = client.subscribe(
        topic,
        "py-slow-sub",
        consumer_type=pulsar.ConsumerType.Shared,
        consumer_name="py-slow-consumer",
        receiver_queue_size=5,
        initial_position=pulsar.InitialPosition.Earliest,
    )
    for _ in range(30):
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        time.sleep(0.05)
        record.ack(consumer, message)
    time.sleep(0.5)  # the acks leave the client's grouping before the close
    producer.close()
    consumer.close()


def ack_hole(client: pulsar.Client, prefix: str, record: RealRecord) -> None:
    """Batches of five with batch-index acknowledgement: the application acknowledges
    every message but the third of each of the first two batches, then closes; the broker
    keeps those members, the rest of their batches acknowledged."""
    topic = f"{NAMESPACE}/{prefix}-holes"
    consumer = client.subscribe(
        topic,
        "py-hole-sub",
        consumer_type=pulsar.ConsumerType.Shared,
        consumer_name="py-hole-consumer",
        batch_index_ack_enabled=True,
    )
    producer = client.create_producer(
        topic,
        producer_name="py-hole-producer",
        batching_enabled=True,
        batching_max_messages=5,
        batching_max_publish_delay_ms=50,
    )
    for i in range(20):
        properties = {"scenario": "ack_hole", "index": str(i)}
        record.send_async(producer, payload(i), i, properties=properties)
    producer.flush()
    for _ in range(20):
        message = consumer.receive(timeout_millis=RECEIVE_MS)
        index = int(message.properties()["index"])
        if index < 10 and index % 5 == 2:
            record.received_message(consumer, message, "none")
        else:
            record.ack(consumer, message)
    time.sleep(0.5)  # the acks leave the client's grouping before the close
    producer.close()
    consumer.close()


def key_shared_stall(client: pulsar.Client, prefix: str, record: RealRecord) -> None:
    """A STICKY Key_Shared subscription split in two halves of the hash range: the low
    half's consumer has a five-message queue and an application that stops for 1.5 s after
    every five messages, the high half's drains its keys at once and then has nothing to
    do while the low half's keys wait for permits."""
    topic = f"{NAMESPACE}/{prefix}-stall"
    low, high = (
        client.subscribe(
            topic,
            "py-stall-sub",
            consumer_type=pulsar.ConsumerType.KeyShared,
            consumer_name=name,
            receiver_queue_size=queue,
            key_shared_policy=pulsar.ConsumerKeySharedPolicy(
                pulsar.KeySharedMode.Sticky, sticky_ranges=[hashes]
            ),
        )
        for name, queue, hashes in (
            ("py-stall-low", 5, (0, 32767)),
            ("py-stall-high", 100, (32768, 65535)),
        )
    )
    producer = client.create_producer(
        topic, producer_name="py-stall-producer", batching_enabled=False
    )
    for i in range(40):
        properties = {"scenario": "key_shared_stall", "index": str(i)}
        record.send(producer, payload(i), i, key=f"key-{i % 8}", properties=properties)
    drain_and_ack(high, record)
    received = 0
    while True:
        try:
            message = low.receive(timeout_millis=DRAINED_MS)
        except pulsar.Timeout:
            break
        record.ack(low, message)
        received += 1
        if received % 5 == 0:
            time.sleep(1.5)
    time.sleep(0.5)
    producer.close()
    low.close()
    high.close()


def epoch(client: pulsar.Client, prefix: str, record: RealRecord) -> None:
    """A Failover consumer that takes ten messages without acknowledging them and asks
    for every unacknowledged message again, then acknowledges the redelivery. (The C++
    client, 3.13, sends no consumer epoch: the Java client's move of it needs a Java
    scenario.)"""
    topic = f"{NAMESPACE}/{prefix}-epoch"
    consumer = client.subscribe(
        topic,
        "py-epoch-sub",
        consumer_type=pulsar.ConsumerType.Failover,
        consumer_name="py-epoch-consumer",
    )
    producer = client.create_producer(
        topic, producer_name="py-epoch-producer", batching_enabled=False
    )
    for i in range(10):
        record.send(producer, payload(i), i, properties={"scenario": "epoch", "index": str(i)})
    for _ in range(10):
        record.received_message(consumer, consumer.receive(timeout_millis=RECEIVE_MS), "none")
    consumer.redeliver_unacknowledged_messages()
    record.events.append({"event": "redeliver_unacknowledged", "t_us": now_us()})
    drain_and_ack(consumer, record)
    time.sleep(0.5)
    producer.close()
    consumer.close()


SCENARIOS: dict[str, Callable[[pulsar.Client, str, RealRecord], None]] = {
    "redelivery": redelivery,
    "slow_consumer": slow_consumer,
    "ack_hole": ack_hole,
    "key_shared_stall": key_shared_stall,
    "epoch": epoch,
}


def main(argv: list[str]) -> int:
    if len(argv) != 5 or argv[0] not in SCENARIOS:
        print(__doc__, f"scenarios: {', '.join(SCENARIOS)}", sep="\n", file=sys.stderr)
        return 2
    name, service_url, _admin_url, prefix, out = argv
    client = pulsar.Client(service_url, logger=quiet_logger())
    record = RealRecord()
    try:
        SCENARIOS[name](client, prefix, record)
    finally:
        client.close()
    Path(out).write_text(json.dumps(record.document(), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
