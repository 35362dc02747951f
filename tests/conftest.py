"""Shared fixtures: one local Spark session, one decoded dataset of every sample capture,
and a writer of small hand-built captures.

Spark and the sample dataset are session-scoped because they are the slow parts of the
suite: starting Spark costs seconds, and decoding every capture once lets many tests read
the same Parquet.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from pwcap.decode.engine import activate

activate()  # before any test module imports the decoders (PWCAP_PURE_PYTHON, stale builds)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
CAPTURE_SUFFIXES = (".pcap", ".pcapng")

# A conversation: the broker's port and the payloads of its segments in capture order,
# each as (0 for client to broker / 1 for broker to client, bytes).
Conversation = tuple[int, Sequence[tuple[int, bytes]]]
CaptureWriter = Callable[[Path, Sequence[Conversation]], Path]


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A small local Spark: two cores, two shuffle partitions, no UI, UTC timestamps, and a
    2 GB heap: the suite's one JVM outlives hundreds of jobs, and with Spark's default 1 GB a
    broadcast late in the suite could find the heap full (``pwcap analyze`` itself asks for
    half the machine's memory)."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers that import pwcap
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("pwcap-tests")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


def sample_captures() -> list[Path]:
    return sorted(p for p in SAMPLES.iterdir() if p.suffix in CAPTURE_SUFFIXES)


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every capture in ``sample_pcaps/`` decoded once into one dataset directory, the
    TLS ones with their key logs."""
    out = tmp_path_factory.mktemp("sample_dataset") / "dataset"
    from pwcap.decode.api import DecodeOptions
    from pwcap.decode.driver import decode_captures

    decode_captures(sample_captures(), out, DecodeOptions(tls_keylogs=sample_keylog_paths()))
    return out


def sample_keylog_paths() -> tuple[str, ...]:
    """:func:`sample_keylogs` as ``DecodeOptions.tls_keylogs`` takes them."""
    return tuple(str(path) for path in sample_keylogs())


def sample_keylogs() -> list[Path]:
    """The key logs of the TLS samples (not the wrong one of the wrong-key sample)."""
    return sorted(p for p in SAMPLES.glob("*.keylog") if not p.name.endswith(".wrong.keylog"))


@pytest.fixture(scope="session")
def analyzed(spark, sample_dataset, tmp_path_factory) -> dict:
    """``pwcap analyze`` run once on the sample dataset: every analytics table as a list
    of row dicts, their Spark schemas, what it printed and where it wrote."""
    import argparse
    import contextlib
    import io

    from pwcap.cli import analyze as cli_analyze
    from pwcap.tables.analytics import ANALYTICS

    out = tmp_path_factory.mktemp("analytics") / "out"
    parser = argparse.ArgumentParser()
    cli_analyze.add_arguments(parser)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert cli_analyze.run(parser.parse_args([str(sample_dataset), "-o", str(out)])) == 0
    tables = {name: spark.read.parquet(str(out / name)) for name in ANALYTICS}
    rows = {name: [r.asDict() for r in frame.collect()] for name, frame in tables.items()}
    schemas = {n: f.schema for n, f in tables.items()}
    return {"rows": rows, "schemas": schemas, "out": printed, "path": out}


@pytest.fixture(scope="session")
def write_capture() -> CaptureWriter:
    """Write Ethernet/IPv4/TCP pcap files of whole conversations (handshake, data, FIN)."""
    return _write_capture


_PCAP_HEADER = struct.Struct("<IHHiIII")
_RECORD = struct.Struct("<IIII")
_MSS = 1448
T0 = 1_700_000_000_000_000  # capture time of the first packet, microseconds


def _write_capture(path: Path, conversations: Sequence[Conversation]) -> Path:
    records = []
    ts = T0
    for index, (port, segments) in enumerate(conversations):
        tcp = _Tcp(40000 + index, port, index)
        packets = [tcp.packet(0, 0x02), tcp.packet(1, 0x12), tcp.packet(0, 0x10)]
        for direction, payload in segments:
            for pos in range(0, len(payload), _MSS):
                packets.append(tcp.packet(direction, 0x18, payload[pos : pos + _MSS]))
        packets += [tcp.packet(0, 0x11), tcp.packet(1, 0x11), tcp.packet(0, 0x10)]
        for packet in packets:
            ts += 1000
            records.append(_RECORD.pack(ts // 10**6, ts % 10**6, len(packet), len(packet)))
            records.append(packet)
    header = _PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)
    path.write_bytes(header + b"".join(records))
    return path


class _Tcp:
    """Headers of one connection's packets, with sequence numbers that follow the data."""

    def __init__(self, client_port: int, server_port: int, index: int) -> None:
        self.ends = (
            (bytes([10, 0, 0, 1 + index]), client_port),
            (bytes([10, 0, 1, 1]), server_port),
        )
        self.seq = [1000, 9000]

    def packet(self, direction: int, flags: int, payload: bytes = b"") -> bytes:
        (src, sport), (dst, dport) = self.ends[direction], self.ends[1 - direction]
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40 + len(payload), 0, 0, 64, 6, 0, src, dst)
        seq, ack = self.seq[direction], self.seq[1 - direction]
        tcp = struct.pack(">HHIIBBHHH", sport, dport, seq, ack, 0x50, flags, 65535, 0, 0)
        self.seq[direction] += len(payload) + (1 if flags & 0x03 else 0)
        ethernet = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00"
        return ethernet + ip + tcp + payload
