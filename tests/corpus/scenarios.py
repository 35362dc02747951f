"""Client-side scenarios, one per sample capture, each driving the official Python client.

Every scenario opens its own client against ``service_url``, records what it sent and
received, and closes everything so the capture ends with clean connection teardown.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pulsar

from tests.corpus.record import ClientRecord, quiet_logger
from tests.corpus.slowlink import BROKER_ADDRESS, CLIENT_DEVICE
from tests.corpus.tcpdump import CaptureOptions

RECEIVE_TIMEOUT_MS = 10_000


@contextmanager
def client(service_url: str) -> Iterator[pulsar.Client]:
    connection = pulsar.Client(service_url, operation_timeout_seconds=15, logger=quiet_logger())
    try:
        yield connection
    finally:
        connection.close()


def payload(i: int, size: int = 64) -> bytes:
    """A compressible, distinct payload."""
    text = f"message {i:05d} " * (size // 14 + 1)
    return text.encode()[:size]


def properties(scenario: str, i: int) -> dict[str, str]:
    return {"scenario": scenario, "index": str(i)}


def receive_and_ack(record: ClientRecord, consumer: pulsar.Consumer, count: int) -> None:
    for _ in range(count):
        message = consumer.receive(RECEIVE_TIMEOUT_MS)
        consumer.acknowledge(message)
        record.received_message(consumer, message, "ack")


def plain(service_url: str) -> ClientRecord:
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "plain", "plain-sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = c.create_producer(
            "plain", producer_name="plain-producer", batching_enabled=False
        )
        for i in range(40):
            record.send(
                producer, payload(i), i, key=f"key-{i % 5}", properties=properties("plain", i)
            )
        receive_and_ack(record, consumer, 40)
        consumer.get_last_message_id()
        producer.close()
        time.sleep(0.3)  # let the grouped acknowledgements go out before closing
        consumer.close()
    return record


def small_plain(service_url: str) -> ClientRecord:
    """A short exchange for the link-layer and snaplen variants."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "small", "small-sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = c.create_producer(
            "small", producer_name="small-producer", batching_enabled=False
        )
        for i in range(10):
            record.send(
                producer, payload(i, 200), i, key=f"key-{i % 3}", properties=properties("small", i)
            )
        receive_and_ack(record, consumer, 10)
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


COMPRESSIONS = {
    "lz4": pulsar.CompressionType.LZ4,
    "zlib": pulsar.CompressionType.ZLib,
    "zstd": pulsar.CompressionType.ZSTD,
    "snappy": pulsar.CompressionType.SNAPPY,
}


def batching(service_url: str) -> ClientRecord:
    """Four batching producers, one per codec, each on its own topic with one consumer."""
    record = ClientRecord()
    with client(service_url) as c:
        for name in COMPRESSIONS:
            send_batches(record, c, name, messages=30, per_batch=10)
    return record


def send_batches(
    record: ClientRecord, c: pulsar.Client, codec: str, messages: int, per_batch: int
) -> None:
    """A batching producer of ``codec`` on topic ``batch-CODEC``, its consumer acking all."""
    topic = f"batch-{codec}"
    consumer = c.subscribe(topic, f"{topic}-sub", initial_position=pulsar.InitialPosition.Earliest)
    producer = c.create_producer(
        topic,
        producer_name=f"batch-{codec}-producer",
        compression_type=COMPRESSIONS[codec],
        batching_enabled=True,
        batching_max_messages=per_batch,
        batching_max_publish_delay_ms=1000,
        block_if_queue_full=True,  # a send past the client's queue waits, never fails
    )
    for i in range(messages):
        record.send_async(
            producer, payload(i, 300), i, key=f"key-{i % 4}", properties=properties(topic, i)
        )
    producer.flush()
    receive_and_ack(record, consumer, messages)
    producer.close()
    time.sleep(0.3)
    consumer.close()


def slow_consumer(service_url: str) -> ClientRecord:
    """A backlog of 60 messages behind a consumer with a receiver queue of 4."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer("slow", producer_name="slow-producer", batching_enabled=False)
        consumer = c.subscribe(
            "slow",
            "slow-sub",
            receiver_queue_size=4,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        for i in range(60):
            record.send(producer, payload(i), i, properties=properties("slow", i))
        for _ in range(60):
            message = consumer.receive(RECEIVE_TIMEOUT_MS)
            time.sleep(0.06)  # the application is the bottleneck
            consumer.acknowledge(message)
            record.received_message(consumer, message, "ack")
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def redelivery_nack(service_url: str) -> ClientRecord:
    """Shared subscription; every fourth message is negatively acknowledged once."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "nack",
            "nack-sub",
            consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=500,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = c.create_producer("nack", producer_name="nack-producer", batching_enabled=False)
        for i in range(24):
            record.send(producer, payload(i), i, properties=properties("nack", i))
        pending = 24
        while pending:
            message = consumer.receive(RECEIVE_TIMEOUT_MS)
            index = int(message.properties()["index"])
            if index % 4 == 0 and message.redelivery_count() == 0:
                consumer.negative_acknowledge(message)
                record.received_message(consumer, message, "nack")
            else:
                consumer.acknowledge(message)
                record.received_message(consumer, message, "ack")
                pending -= 1
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def redelivery_ack_timeout(service_url: str) -> ClientRecord:
    """Exclusive subscription with a 10 s ack timeout; three messages are left unacked once.

    The connection is held past the client's 30 s keep-alive so a client PING is captured.
    """
    record = ClientRecord()
    started = time.monotonic()
    with client(service_url) as c:
        consumer = c.subscribe(
            "acktimeout",
            "acktimeout-sub",
            unacked_messages_timeout_ms=10_000,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = c.create_producer(
            "acktimeout", producer_name="acktimeout-producer", batching_enabled=False
        )
        for i in range(12):
            record.send(producer, payload(i), i, properties=properties("acktimeout", i))
        acked = set()
        while len(acked) < 12:
            message = consumer.receive(30_000)
            index = int(message.properties()["index"])
            if index < 3 and message.redelivery_count() == 0 and index not in acked:
                record.received_message(consumer, message, "none")
                continue
            consumer.acknowledge(message)
            record.received_message(consumer, message, "ack")
            acked.add(index)
        producer.close()
        time.sleep(max(0.3, 33 - (time.monotonic() - started)))
        consumer.close()
    return record


def shared_two_consumers(service_url: str) -> ClientRecord:
    record = ClientRecord()
    with client(service_url) as c:
        consumers = [
            c.subscribe(
                "shared",
                "shared-sub",
                consumer_type=pulsar.ConsumerType.Shared,
                consumer_name=f"shared-consumer-{n}",
                receiver_queue_size=10,
                initial_position=pulsar.InitialPosition.Earliest,
            )
            for n in range(2)
        ]
        producer = c.create_producer(
            "shared", producer_name="shared-producer", batching_enabled=False
        )
        for i in range(40):
            record.send(
                producer, payload(i), i, key=f"key-{i % 6}", properties=properties("shared", i)
            )
        received = 0
        while received < 40:
            for consumer in consumers:
                try:
                    message = consumer.receive(200)
                except pulsar.Timeout:
                    continue
                consumer.acknowledge(message)
                record.received_message(consumer, message, "ack")
                received += 1
        producer.close()
        time.sleep(0.3)
        for consumer in consumers:
            consumer.close()
    return record


def chunked(service_url: str) -> ClientRecord:
    """Chunking with a 6 KiB broker max message size: 20 KiB messages split into chunks."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "chunked", "chunked-sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = c.create_producer(
            "chunked",
            producer_name="chunked-producer",
            batching_enabled=False,
            chunking_enabled=True,
        )
        sizes = [20_000, 100, 15_000, 6_500, 300, 20_000]
        for i, size in enumerate(sizes):
            record.send(
                producer, payload(i, size), i, key=f"key-{i}", properties=properties("chunked", i)
            )
        receive_and_ack(record, consumer, len(sizes))
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def partitioned(service_url: str) -> ClientRecord:
    """A topic with 3 partitions, round-robin producer, one consumer over all partitions."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "parted", "parted-sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = c.create_producer(
            "parted",
            producer_name="parted-producer",
            batching_enabled=False,
            message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution,
        )
        for i in range(30):
            record.send(
                producer, payload(i), i, key=f"key-{i % 7}", properties=properties("parted", i)
            )
        receive_and_ack(record, consumer, 30)
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def entry_metadata(service_url: str) -> ClientRecord:
    """Broker entry metadata on every delivered entry (batched, so indexes jump)."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe("bem", "bem-sub", initial_position=pulsar.InitialPosition.Earliest)
        producer = c.create_producer(
            "bem",
            producer_name="bem-producer",
            batching_enabled=True,
            batching_max_messages=5,
            batching_max_publish_delay_ms=1000,
        )
        for i in range(20):
            record.send_async(
                producer, payload(i), i, key=f"key-{i % 2}", properties=properties("bem", i)
            )
        producer.flush()
        receive_and_ack(record, consumer, 20)
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def seek_and_unsubscribe(service_url: str) -> ClientRecord:
    """Failover subscription: read, ask for the last id, seek back, re-read, unsubscribe."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "seek",
            "seek-sub",
            consumer_type=pulsar.ConsumerType.Failover,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = c.create_producer("seek", producer_name="seek-producer", batching_enabled=False)
        for i in range(8):
            record.send(
                producer, payload(i), i, key=f"key-{i % 2}", properties=properties("seek", i)
            )
        receive_and_ack(record, consumer, 8)
        consumer.get_last_message_id()
        time.sleep(0.3)  # the grouped acknowledgements go out before the seek
        consumer.seek(pulsar.MessageId.earliest)
        receive_and_ack(record, consumer, 8)
        producer.close()
        time.sleep(0.3)
        consumer.unsubscribe()
    return record


def one_codec(codec: str, service_url: str) -> ClientRecord:
    """A benchmark shape: 2,000 messages of one codec in batches of 100, sent and delivered."""
    record = ClientRecord()
    with client(service_url) as c:
        send_batches(record, c, codec, messages=2000, per_batch=100)
    return record


def large(service_url: str) -> ClientRecord:
    """A benchmark shape: messages of 100 kB, neither batched nor chunked."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "large", "large-sub", initial_position=pulsar.InitialPosition.Earliest
        )
        producer = c.create_producer(
            "large", producer_name="large-producer", batching_enabled=False
        )
        for i in range(4):
            record.send(
                producer, payload(i, 100_000), i, key=f"key-{i}", properties=properties("large", i)
            )
        receive_and_ack(record, consumer, 4)


# -- problems, for the findings (jobs/findings.py): each makes one happen --------------------


def refused_producer(service_url: str) -> ClientRecord:
    """The broker answers the first four PRODUCER requests with ServiceNotReady: the client
    looks the topic up and tries again, until the broker takes it."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "refused", producer_name="refused-producer", batching_enabled=False
        )
        for i in range(5):
            record.send(producer, payload(i), i, properties=properties("refused", i))
        producer.close()
    return record


def refused_lookups(service_url: str) -> ClientRecord:
    """The broker answers the first seven LOOKUPs with ServiceNotReady (as while nobody
    owns the topic): the client looks the topic up again, backing off, until it is
    answered, then attaches its producer and sends."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "lookupstorm", producer_name="lookup-storm-producer", batching_enabled=False
        )
        for i in range(3):
            record.send(producer, payload(i), i, properties=properties("lookupstorm", i))
        producer.close()
    return record


def unload_with_ack_lost(service_url: str) -> ClientRecord:
    """The broker unloads the topic when the fifth ACK arrives: that ACK is lost, the
    producer and consumer are closed by the broker and reconnect, and the messages not
    acknowledged (the one whose ACK was lost among them) are delivered again."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "unload",
            "unload-sub",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = c.create_producer(
            "unload", producer_name="unload-producer", batching_enabled=False
        )
        for i in range(10):
            record.send(producer, payload(i), i, properties=properties("unload", i))
        acked: set[str] = set()
        while len(acked) < 10:
            message = consumer.receive(RECEIVE_TIMEOUT_MS)
            consumer.acknowledge(message)
            record.received_message(consumer, message, "ack")
            acked.add(message.properties()["index"])
            time.sleep(0.2)  # each ACK goes out alone (the client groups those of 100 ms)
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def unreceipted_sends(service_url: str) -> ClientRecord:
    """The broker stores the sends after the third and never answers them: the client's
    one-second send timeout fails them, and the application closes its producer."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "unreceipted",
            producer_name="unreceipted-producer",
            batching_enabled=False,
            send_timeout_millis=1000,
        )
        for i in range(8):
            try:
                record.send(producer, payload(i), i, properties=properties("unreceipted", i))
            except pulsar.Timeout:
                record.failed.append({"sequence_id": i, "error": "Timeout"})
        producer.close()
    return record


def connect_storm(service_url: str) -> ClientRecord:
    """An application that opens a client (a connection) for every message it sends."""
    record = ClientRecord()
    for i in range(8):
        with client(service_url) as c:
            producer = c.create_producer("storm", batching_enabled=False)
            record.send(producer, payload(i), i, properties=properties("storm", i))
            producer.close()
    return record


def nack_storm(service_url: str) -> ClientRecord:
    """Twenty messages negatively acknowledged six times each, 100 ms apart: most
    deliveries are redeliveries."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "nackstorm",
            "nackstorm-sub",
            consumer_type=pulsar.ConsumerType.Shared,
            negative_ack_redelivery_delay_ms=100,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = c.create_producer(
            "nackstorm", producer_name="nackstorm-producer", batching_enabled=False
        )
        for i in range(20):
            record.send(producer, payload(i), i, properties=properties("nackstorm", i))
        pending = 20
        while pending:
            message = consumer.receive(RECEIVE_TIMEOUT_MS)
            if message.redelivery_count() < 6:
                consumer.negative_acknowledge(message)
                record.received_message(consumer, message, "nack")
            else:
                consumer.acknowledge(message)
                record.received_message(consumer, message, "ack")
                pending -= 1
        producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def ack_hole(service_url: str) -> ClientRecord:
    """A consumer that acknowledges every message but the third, then closes."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe(
            "hole",
            "hole-sub",
            consumer_type=pulsar.ConsumerType.Shared,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producer = c.create_producer("hole", producer_name="hole-producer", batching_enabled=False)
        for i in range(10):
            record.send(producer, payload(i), i, properties=properties("hole", i))
        for _ in range(10):
            message = consumer.receive(RECEIVE_TIMEOUT_MS)
            if message.properties()["index"] == "2":
                record.received_message(consumer, message, "none")
                continue
            consumer.acknowledge(message)
            record.received_message(consumer, message, "ack")
        producer.close()


# Names a hostile client chooses to take over the terminal of whoever reads the capture:
# clear the screen, retitle the window (OSC ending in BEL), overwrite the line start (CR),
# forge a whole frame line (newline), and a name far longer than any line.
CLEAR_SCREEN = "\x1b[2J"
SET_TITLE = "\x1b]0;pwned\x07"
FORGED_LINE = "\n     1    0.000000                   1 -> SEND                         forged"
LONG_NAME = "n" * 10_000


def hostile_names(service_url: str) -> ClientRecord:
    """A producer, a consumer and their messages whose names and properties carry
    terminal control sequences, and names of 10,000 characters. The consumer's receiver
    queue of one starves it and each message is negatively acknowledged once, so the
    analytics name the subscription too."""
    record = ClientRecord()
    topic = f"hostile{CLEAR_SCREEN}topic"
    with client(service_url) as c:
        consumer = c.subscribe(
            topic,
            f"sub{SET_TITLE}{LONG_NAME}",  # a heading of the report names it
            consumer_type=pulsar.ConsumerType.Shared,
            consumer_name=f"consumer\rOVERWRITTEN{FORGED_LINE}",
            receiver_queue_size=1,
            negative_ack_redelivery_delay_ms=200,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        producers = [
            c.create_producer(
                topic, producer_name=f"producer{FORGED_LINE}", batching_enabled=False
            ),
            c.create_producer(topic, producer_name=LONG_NAME, batching_enabled=False),
        ]
        for i in range(4):
            properties = {
                f"key{CLEAR_SCREEN}": f"value{SET_TITLE}\r{FORGED_LINE}",
                "long": LONG_NAME,
            }
            record.send(
                producers[i % 2], payload(i), i, key=f"k{CLEAR_SCREEN}", properties=properties
            )
        pending = 4
        while pending:
            message = consumer.receive(RECEIVE_TIMEOUT_MS)
            time.sleep(0.05)  # the application is slower than its queue of one
            if message.redelivery_count() == 0:
                consumer.negative_acknowledge(message)
                record.received_message(consumer, message, "nack")
                continue
            consumer.acknowledge(message)
            record.received_message(consumer, message, "ack")
            pending -= 1
        for producer in producers:
            producer.close()
        time.sleep(0.3)
        consumer.close()
    return record


def stalled_broker(service_url: str) -> ClientRecord:
    """The broker stops reading the connection for 1.5 s after its first SEND, its
    receive buffer small: the client's chunked messages fill it, the broker advertises a
    zero window, and the chunks after it wait."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "stalled",
            producer_name="stalled-producer",
            batching_enabled=False,
            chunking_enabled=True,
        )
        for i in range(3):
            record.send_async(producer, payload(i, 60_000), i, properties=properties("stalled", i))
        producer.flush()
        producer.close()
    return record


def send_one_chunked_message(service_url: str) -> None:
    """A producer sending one message of twenty chunks, then waiting for its receipt
    (:func:`crashed_producer` kills the process in the meantime)."""
    with client(service_url) as c:
        producer = c.create_producer(
            "crashed",
            producer_name="crashed-producer",
            batching_enabled=False,
            chunking_enabled=True,
        )
        producer.send(payload(0, 400_000), properties=properties("crashed", 0))


def crashed_producer(service_url: str) -> ClientRecord:
    """The application of a producer is killed in the middle of a chunked message, while
    another goes on sending. The broker stops reading a connection after its first SEND
    (a small receive buffer, as in :func:`stalled_broker`), so the client could hand its
    socket only the first chunks; the kernel sends those when the broker reads again, and
    the rest are lost with the process: the message is never completed."""
    command = f"import {__name__} as s; s.send_one_chunked_message({service_url!r})"
    sender = subprocess.Popen([sys.executable, "-c", command], cwd=Path(__file__).parents[2])
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "survivor", producer_name="survivor-producer", batching_enabled=False
        )
        for i in range(12):
            if i == 4:  # the crashed client connected, and filled its socket
                sender.kill()
                sender.wait()
            record.send_async(producer, payload(i), i, properties=properties("survivor", i))
            time.sleep(0.5)
        producer.flush()
        producer.close()
    return record


def slow_broker(service_url: str) -> ClientRecord:
    """Three producers on a broker that takes 1.2 s to create each."""
    record = ClientRecord()
    with client(service_url) as c:
        for n in range(3):
            producer = c.create_producer(
                f"slowbroker-{n}", producer_name=f"slowbroker-{n}", batching_enabled=False
            )
            record.send(producer, payload(n), 0, properties=properties("slowbroker", n))
            producer.close()
    return record


def lossy_link(service_url: str) -> ClientRecord:
    """Sixty messages over a link that drops a fifth of the client's packets."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "lossy", producer_name="lossy-producer", batching_enabled=False
        )
        for i in range(60):
            record.send(producer, payload(i, 400), i, properties=properties("lossy", i))
        producer.close()
    return record


def slow_network(service_url: str) -> ClientRecord:
    """Twenty messages sent one at a time and received by a consumer, across a link that
    holds every packet 60 ms each way: each request waits a round trip the broker is not
    to blame for."""
    record = ClientRecord()
    with client(service_url) as c:
        consumer = c.subscribe("slownet", "slownet-sub", consumer_name="slownet-consumer")
        producer = c.create_producer(
            "slownet", producer_name="slownet-producer", batching_enabled=False
        )
        for i in range(20):
            record.send(producer, payload(i), i, properties=properties("slownet", i))
        receive_and_ack(record, consumer, 20)
        producer.close()
        consumer.close()
    return record


def refused_sends(service_url: str) -> ClientRecord:
    """The broker answers the first two SENDs with SEND_ERROR (PersistenceError): the
    client reconnects and sends them again."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "senderror", producer_name="senderror-producer", batching_enabled=False
        )
        for i in range(4):
            record.send(producer, payload(i), i, properties=properties("senderror", i))
        producer.close()
    return record


def slow_receipt(service_url: str) -> ClientRecord:
    """One send the broker answers after 31 s, longer than the clients' default send
    timeout (this client waits 60 s)."""
    record = ClientRecord()
    with client(service_url) as c:
        producer = c.create_producer(
            "slowreceipt",
            producer_name="slowreceipt-producer",
            batching_enabled=False,
            send_timeout_millis=60_000,
        )
        record.send(producer, payload(0), 0, properties=properties("slowreceipt", 0))
        producer.close()
    return record


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    run: Callable[[str], ClientRecord]
    port: int = 6650
    host: str = "127.0.0.1"
    hostname: str | None = None  # a name mapped to ``host`` in /etc/hosts while it runs
    broker: dict[str, object] = field(default_factory=dict)  # BrokerConfig overrides
    capture: CaptureOptions = field(default_factory=CaptureOptions)
    # Percent of the client's packets to the broker dropped after the capture point saw
    # them (in a network namespace of its own): the client sends them again.
    loss_percent: int = 0
    # A client is killed while it writes: the broker's journal has frames the wire never
    # carried (answers to the dead client), and its connection ends cut, with a reset.
    kills_a_client: bool = False
    # Milliseconds each packet takes each way between the client and the broker, each in
    # a network namespace of its own (tests/corpus/slowlink.py); captured at the client.
    delay_ms: float = 0
    folder: str = "sample_pcaps"  # where it is kept, below the repository


SCENARIOS = [
    Scenario(
        "pulsar_plain",
        "non-batched messages with keys and properties, exclusive consumer acking all",
        plain,
    ),
    Scenario(
        "pulsar_batching_compression",
        "batching producers with LZ4, ZLIB, ZSTD and SNAPPY",
        batching,
    ),
    Scenario(
        "pulsar_slow_consumer",
        "receiver queue of 4 behind a 60-message backlog; broker pings every second",
        slow_consumer,
        broker={"ping_interval": 1.0},
    ),
    Scenario("pulsar_redelivery_nack", "negative acks on a shared subscription", redelivery_nack),
    Scenario(
        "pulsar_redelivery_ack_timeout",
        "ack timeout (10 s) on an exclusive subscription, held past the 30 s client keep-alive",
        redelivery_ack_timeout,
    ),
    Scenario(
        "pulsar_shared_two_consumers",
        "two consumers on one shared subscription",
        shared_two_consumers,
    ),
    Scenario(
        "pulsar_seek_unsubscribe",
        "failover subscription: get-last-message-id, seek to earliest, re-read, unsubscribe",
        seek_and_unsubscribe,
    ),
    Scenario(
        "pulsar_chunked",
        "chunked large messages, broker advertises a 6 KiB max message size",
        chunked,
        broker={"max_message_size": 6144},
    ),
    Scenario(
        "pulsar_partitioned_port16650",
        "a 3-partition topic, served on the non-standard port 16650",
        partitioned,
        port=16650,
        broker={"partitions": {"persistent://public/default/parted": 3}},
    ),
    Scenario(
        "pulsar_entry_metadata",
        "broker entry metadata (magic 0x0e02) on every delivered entry",
        entry_metadata,
        broker={"entry_metadata": True},
    ),
    Scenario(
        "pulsar_ipv6",
        "a short exchange over IPv6 loopback",
        small_plain,
        host="::1",
        hostname="pwcap-ipv6-loopback",
    ),
    Scenario(
        "pulsar_linux_sll",
        "a short exchange captured on 'any' (Linux cooked v1)",
        small_plain,
        capture=CaptureOptions(interface="any", linktype="LINUX_SLL"),
    ),
    Scenario(
        "pulsar_linux_sll2",
        "a short exchange captured on 'any' (Linux cooked v2)",
        small_plain,
        capture=CaptureOptions(interface="any", linktype="LINUX_SLL2"),
    ),
    Scenario(
        "pulsar_snaplen96",
        "a short exchange captured live with a 96-byte snaplen (payloads truncated)",
        small_plain,
        capture=CaptureOptions(snaplen=96),
    ),
    Scenario(
        "pulsar_problem_refused_producer",
        "the broker refuses the first four PRODUCER requests with ServiceNotReady",
        refused_producer,
        broker={"refuse": {"PRODUCER": [4, "ServiceNotReady"]}},
    ),
    Scenario(
        "pulsar_problem_lookup_storm",
        "the broker refuses the first seven LOOKUPs with ServiceNotReady",
        refused_lookups,
        broker={"refuse": {"LOOKUP": [7, "ServiceNotReady"]}},
    ),
    Scenario(
        "pulsar_problem_unload",
        "the broker unloads the topic at the fifth ACK (which is lost): clients reconnect",
        unload_with_ack_lost,
        broker={"unload_on_ack": {"persistent://public/default/unload": 5}},
    ),
    Scenario(
        "pulsar_problem_unreceipted",
        "the broker never answers the sends after the third; the client's send timeout is 1 s",
        unreceipted_sends,
        broker={"hold_receipts_after": {"persistent://public/default/unreceipted": 3}},
    ),
    Scenario(
        "pulsar_problem_connect_storm",
        "a new client, so a new connection, for each of eight messages",
        connect_storm,
    ),
    Scenario(
        "pulsar_problem_nack_storm",
        "twenty messages negatively acknowledged six times each, 100 ms apart",
        nack_storm,
    ),
    Scenario(
        "pulsar_problem_ack_hole",
        "a shared consumer acknowledges every message but the third, then closes",
        ack_hole,
    ),
    Scenario(
        "pulsar_problem_stalled_broker",
        "the broker stops reading for 1.5 s with a 4 KiB receive buffer: zero windows",
        stalled_broker,
        broker={"max_message_size": 20_000, "stall_reading": 1.5, "receive_buffer": 4096},
    ),
    Scenario(
        "pulsar_problem_crashed_producer",
        "a producer killed in the middle of a chunked message, another sending on",
        crashed_producer,
        broker={"max_message_size": 20_000, "stall_reading": 3.0, "receive_buffer": 4096},
        kills_a_client=True,
    ),
    Scenario(
        "pulsar_problem_slow_broker",
        "the broker takes 1.2 s to answer each PRODUCER",
        slow_broker,
        broker={"slow_answers": {"PRODUCER": 1.2}},
    ),
    Scenario(
        "pulsar_problem_lossy_link",
        "a fifth of the client's packets to the broker dropped past the capture point",
        lossy_link,
        loss_percent=20,
    ),
    Scenario(
        "pulsar_problem_slow_network",
        "a link that holds every packet 60 ms each way between the client and the broker",
        slow_network,
        host=BROKER_ADDRESS,
        capture=CaptureOptions(interface=CLIENT_DEVICE),
        delay_ms=60,
    ),
    Scenario(
        "pulsar_problem_send_error",
        "the broker answers the first two SENDs with SEND_ERROR (PersistenceError)",
        refused_sends,
        broker={"send_errors": {"persistent://public/default/senderror": [2, "PersistenceError"]}},
    ),
    Scenario(
        "pulsar_problem_slow_receipt",
        "the broker answers a SEND after 31 s (the client waits up to 60 s)",
        slow_receipt,
        broker={"slow_answers": {"SEND": 31.0}},
    ),
]

# Recordings for the benchmark's shapes of traffic (bench/samples/, larger than a test needs):
# `python -m tests.corpus.regenerate --out bench/samples NAME ...` records them.
BENCH_SCENARIOS = [
    *(
        Scenario(
            f"pulsar_batch_{codec}",
            f"one batching producer with {codec.upper()}: 2,000 messages in batches of 100",
            partial(one_codec, codec),
        )
        for codec in COMPRESSIONS
    ),
    Scenario("pulsar_large", "messages of 100 kB, neither batched nor chunked", large),
]

# Kept apart from sample_pcaps/ (which the demo decodes): a capture made to attack the
# terminal of whoever reads it, for the tests of what pwcap prints.
HOSTILE = [
    Scenario(
        "pulsar_hostile_names",
        "names and properties carrying terminal control sequences and 10,000 characters",
        hostile_names,
        folder="tests/hostile",
    ),
]
