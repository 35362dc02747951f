"""The Kafka 0.7 sample scenarios: which real client runs what against which broker setup.

Each scenario's traffic comes from a real 0.7 client: franz-kafka 0.7.5 (Node) for
PRODUCE, FETCH and OFFSETS with no, gzip or snappy compression; samsa 0.3.11 (Python 2.7)
for MULTIPRODUCE and MULTIFETCH, which franz-kafka does not send, and magic-0 messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

CLIENT_DIR = Path(__file__).resolve().parent / "client"
FRANZ = "franz-kafka 0.7.5 (Node)"
SAMSA = "samsa 0.3.11 (Python 2.7)"
HANDBUILT = "pwcap hand-built client (tests/kafka07/handbuilt.py), not a real 0.7 client"


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    client: str  # FRANZ, SAMSA or HANDBUILT
    script_args: tuple[str, ...]  # the client script and its scenario name, if any
    port: int = 9092
    partitions: dict[str, int] = field(default_factory=dict)


SCENARIOS = [
    Scenario(
        "kafka07_plain",
        "three uncompressed PRODUCE batches, then FETCH from offset 0 until nothing is new",
        FRANZ,
        ("franz.js", "plain"),
    ),
    Scenario(
        "kafka07_gzip",
        "gzip-wrapped PRODUCE batches on two partitions, fetched back and expanded",
        FRANZ,
        ("franz.js", "gzip"),
        partitions={"gzip-events": 2},
    ),
    Scenario(
        "kafka07_snappy",
        "snappy-wrapped (raw snappy, as franz-kafka writes it) batches on two partitions",
        FRANZ,
        ("franz.js", "snappy"),
        partitions={"snappy-events": 2},
    ),
    Scenario(
        "kafka07_offsets",
        "OFFSETS latest / earliest / by time before and after producing, then a fetch",
        FRANZ,
        ("franz.js", "offsets"),
    ),
    Scenario(
        "kafka07_partial_fetch",
        "FETCH with a small MAX_SIZE: every response ends in a partial message",
        FRANZ,
        ("franz.js", "partial"),
    ),
    Scenario(
        "kafka07_errors",
        "OffsetOutOfRange and WrongPartition answers, an unknown topic, and two requests "
        "0.7 answers by closing the connection (PRODUCE / OFFSETS to a wrong partition)",
        FRANZ,
        ("franz.js", "errors"),
    ),
    Scenario(
        "kafka07_stream",
        "franz-kafka's application API: a Topic stream batching writes over two partitions "
        "while its consumer loop fetches both in turn (backoff, MAX_SIZE cutting batches)",
        FRANZ,
        ("franz.js", "stream"),
        partitions={"stream": 2},
    ),
    Scenario(
        "kafka07_multi",
        "MULTIPRODUCE and MULTIFETCH across two topics and five partitions (magic 0 and 1), "
        "with partial tails and an OffsetOutOfRange part, OFFSETS and a FETCH",
        SAMSA,
        ("samsa_multi.py",),
        partitions={"clicks": 3, "views": 2},
    ),
    Scenario(
        "kafka07_snappy_framed",
        "snappy in the Java client's framed (xerial) stream, one wrapper spanning two "
        "blocks; sent by our hand-built client, as no real client here writes it",
        HANDBUILT,
        ("tests.kafka07.handbuilt",),
    ),
    Scenario(
        "kafka07_gzip_port19092",
        "the gzip scenario on port 19092, for content-based detection",
        FRANZ,
        ("franz.js", "gzip"),
        port=19092,
        partitions={"gzip-events": 2},
    ),
]

DERIVED_FROM = "kafka07_partial_fetch"
DERIVED_KINDS = ("lost", "midstream")
