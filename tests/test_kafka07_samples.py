"""The Kafka 0.7 decoder on real captures (franz-kafka and samsa against the test broker),
checked against the broker's journal of every request and response and the truth file.

Captures go through pwcap's own reassembly; records can be dropped on the way in to make
a lossy capture, or one that starts mid-connection, out of a clean one.
"""

from __future__ import annotations

import json
import operator
import random
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import partial
from pathlib import Path

import dpkt
import pyarrow as pa
import pytest

from pwcap.capture import RecordReader, iter_records, open_capture
from pwcap.capture.events import Connection, Direction
from pwcap.decode.api import DecodeOptions
from pwcap.decode.kafka07 import (
    Kafka07Decoder,
    find_request_start,
    find_response_start,
    looks_like_request,
    looks_like_response,
)
from pwcap.tables.schema import arrow_schema
from tests.kafka07_frames import RecordingSink

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
RECORDED = sorted(
    p.name.removesuffix(".broker.jsonl") for p in SAMPLES.glob("kafka07_*.broker.jsonl")
)
DERIVED = sorted(
    p.name.removesuffix(".truth.json")
    for p in SAMPLES.glob("kafka07_derived_*.truth.json")
    if not (SAMPLES / p.name.replace(".truth.json", ".broker.jsonl")).exists()
)


class Decoded:
    """Rows of one capture, and each connection's frames by direction, in stream order.

    Connections are numbered in the order they opened, as the broker journal numbers them.
    """

    def __init__(self, sink: RecordingSink, conns: list[Connection]) -> None:
        number = {conn.conn_id: index for index, conn in enumerate(conns, 1)}
        for row in (*sink.frames, *sink.messages, *sink.anomalies):
            if row.get("conn_id") in number:
                row["conn_id"] = number[row["conn_id"]]
        self.sink = sink
        self.conns = {number[conn.conn_id]: conn for conn in conns}
        self.frames: dict[tuple[int, str], list[dict]] = defaultdict(list)
        for row in sink.frames:
            self.frames[(row["conn_id"], row["direction"])].append(row)


class KafkaStreams:
    """A StreamSink giving every connection its own Kafka07Decoder."""

    def __init__(self, options: DecodeOptions) -> None:
        self.options = options
        self.sink = RecordingSink()
        self.conns: list[Connection] = []
        self._decoders: dict[int, Kafka07Decoder] = {}

    def on_open(self, conn: Connection) -> None:
        self.conns.append(conn)
        self._decoders[conn.conn_id] = Kafka07Decoder(conn, self.sink.rows, self.options, conn.flip)

    def on_data(self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes):
        self._decoders[conn.conn_id].on_data(direction, ts, offset, data)

    def on_gap(self, conn: Connection, direction: Direction, ts: int, offset: int, size: int):
        self._decoders[conn.conn_id].on_gap(direction, ts, offset, size)

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        self._decoders[conn.conn_id].on_close(ts)


def decode_capture(path: Path, broker_port: int, keep: Callable[[int], bool] = bool) -> Decoded:
    """Decode a capture through pwcap's reassembly; ``keep(index)`` False drops the record
    at that (1-based) index, as if the capture had missed it (segment loss, a later start)."""
    streams = KafkaStreams(DecodeOptions(capture=path.name))
    reader = RecordReader(streams, server_ports={broker_port})
    stream, name = open_capture(path)
    with stream:
        records = iter_records(stream, name)
        reader.feed_records(record for index, record in enumerate(records, 1) if keep(index))
    reader.finish()
    return Decoded(streams.sink, streams.conns)


def load(name: str, keep: Callable[[int], bool] = bool) -> tuple[dict, Decoded]:
    truth = json.loads((SAMPLES / f"{name}.truth.json").read_text())
    return truth, decode_capture(SAMPLES / f"{name}.pcap", truth["capture"]["port"], keep)


def request_type(row: dict) -> str:
    """The request type a frame is about (what the truth files count responses by)."""
    return row["command"].removesuffix("_RESPONSE")


def count_frames(rows: list[dict]) -> dict[str, dict[str, int]]:
    counted: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        counted[row["direction"]][request_type(row)] += 1
    return {direction: dict(c) for direction, c in counted.items()}


# -- recorded captures ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=RECORDED)
def recorded(request):
    truth, decoded = load(request.param)
    journal = [json.loads(line) for line in (SAMPLES / f"{request.param}.broker.jsonl").open()]
    return truth, decoded, journal


def test_frames_by_direction_and_type_equal_the_truth_without_anomalies(recorded):
    truth, decoded, _ = recorded
    assert count_frames(decoded.sink.frames) == truth["frames"]
    assert decoded.sink.anomalies == []


def test_every_frame_matches_its_journal_line(recorded):
    _, decoded, journal = recorded
    lines = defaultdict(list)
    for line in journal:
        if line["dir"] in ("c2b", "b2c"):
            lines[(line["conn"], line["dir"])].append(line)
    assert set(lines) <= set(decoded.frames)
    for key, rows in decoded.frames.items():
        assert len(rows) == len(lines[key]), key
        for row, line in zip(rows, lines[key], strict=True):
            assert request_type(row) == line["type"]
            assert row["frame_size"] == line["size"]
            parts = line["parts"]
            if len(parts) == 1:
                assert (row["topic"], row["partition"]) == (
                    parts[0]["topic"],
                    parts[0]["partition"],
                )
                if "max_size" in parts[0]:
                    assert (row["offset"], row["max_size"]) == (
                        parts[0]["offset"],
                        parts[0]["max_size"],
                    )
            if "time" in parts[0] and line["dir"] == "c2b":
                assert f"max_offsets={parts[0]['max_offsets']}" in row["info"]
            if line["dir"] == "b2c":
                assert row["answers"] == line["type"]  # paired in order
                assert row["error_code"] == ERROR_NAMES[line["error"]]
                if "offsets" in parts[0]:
                    assert f"offsets={parts[0]['offsets']}" in row["info"]
            if any("messages" in part for part in parts):
                assert row["num_messages"] == sum(len(p["messages"]) for p in parts)
                if line["dir"] == "b2c":
                    assert row["truncated_tail"] == sum(p["truncated_tail"] for p in parts)


ERROR_NAMES = {-1: "Unknown", 0: "NoError", 1: "OffsetOutOfRange", 3: "WrongPartition"}


def test_responses_point_at_the_request_they_answer(recorded):
    _, decoded, _ = recorded
    for (conn, direction), rows in decoded.frames.items():
        if direction != "b2c":
            continue
        requests = [r for r in decoded.frames[(conn, "c2b")] if r["command"] in ANSWERED]
        assert [(r["answers"], r["request_ts"]) for r in rows] == [
            (r["command"], r["ts"]) for r in requests[: len(rows)]
        ]
        assert all(r["request_ts"] <= r["ts_first"] for r in rows)  # latency is never negative


ANSWERED = {"FETCH", "MULTIFETCH", "OFFSETS"}


def message_fields(row: dict) -> tuple:
    return (
        row["conn_id"],
        row["topic"],
        row["partition"],
        row["magic"],
        row["compression"],
        row["checksum_ok"],
        row["payload_size"],
        row["payload_sha256"],
        row["batch_index"],
    )


def truth_fields(message: dict) -> tuple:
    return (
        message["conn"],
        message["topic"],
        message["partition"],
        message["magic"],
        message["compression"],
        message["crc_ok"],
        message["payload_size"],
        message["sha256"],
        message["inner_index"],
    )


def test_produced_messages_equal_the_truth(recorded):
    truth, decoded, _ = recorded
    ours = [message_fields(m) for m in decoded.sink.messages if m["direction"] == "c2b"]
    assert ours == [truth_fields(m) for m in truth["produced"]]
    assert all(m["offset"] is None for m in decoded.sink.messages if m["direction"] == "c2b")


def test_fetched_messages_equal_the_truth_with_their_log_offsets(recorded):
    truth, decoded, _ = recorded
    fetched = [m for m in decoded.sink.messages if m["direction"] == "b2c"]
    assert [(*message_fields(m), m["offset"]) for m in fetched] == [
        (*truth_fields(m), m["offset"]) for m in truth["fetched"]
    ]


def test_rows_fit_the_dataset_schema(recorded):
    _, decoded, _ = recorded
    sink = decoded.sink
    for table, rows in (("frames", sink.frames), ("messages", sink.messages)):
        assert len(pa.Table.from_pylist(rows, schema=arrow_schema(table))) == len(rows)


def test_connection_fields_count_the_frames(recorded):
    truth, decoded, _ = recorded
    assert len(decoded.conns) == len(truth["connections"])
    for expected in truth["connections"]:
        frames = decoded.frames
        assert len(frames[(expected["conn"], "c2b")]) == expected["requests"]
        assert len(frames[(expected["conn"], "b2c")]) == expected["responses"]


# -- derived captures (segments lost, capture started mid-connection) ----------------------


@pytest.mark.parametrize("name", DERIVED)
def test_derived_captures_decode_every_undamaged_frame(name):
    truth, decoded = load(name)
    damaged = Counter((d["dir"], d["type"]) for d in truth["manifest"]["damaged_frames"])
    expected = {
        direction: {t: n - damaged[(direction, t)] for t, n in types.items()}
        for direction, types in truth["frames"].items()
    }
    assert count_frames(decoded.sink.frames) == {
        d: {t: n for t, n in types.items() if n} for d, types in expected.items()
    }
    kinds = {a["kind"] for a in decoded.sink.anomalies}
    assert kinds <= {"resync", "truncated_frame", "pairing_lost"}


def assert_pairs_only_with_their_own_request(truth: dict, decoded: Decoded) -> None:
    """A paired response's messages are exactly those the broker sent for that request;
    every other fetched message decoded is one the broker sent."""
    sent = defaultdict(list)  # (conn, request_seq) -> the messages the broker answered
    for m in truth["fetched"]:
        sent[(m["conn"], m["request_seq"])].append((m["sha256"], m["offset"]))
    requests = defaultdict(list)  # what a FETCH asked for -> its request_seq on the connection
    for part in truth["fetch_parts"]:
        key = (part["conn"], part["topic"], part["partition"], part["offset"], part["max_size"])
        requests[key].append(part["request_seq"])
    by_client = {c["client"]: c["conn"] for c in truth["connections"]}
    truth_conn = {
        conn_id: by_client[f"{conn.client_ip}:{conn.client_port}"]
        for conn_id, conn in decoded.conns.items()
    }
    ours = defaultdict(list)
    for m in decoded.sink.messages:
        if m["direction"] == "b2c":
            ours[(m["conn_id"], m["stream_offset"])].append((m["payload_sha256"], m["offset"]))
    for row in decoded.sink.frames:
        if (
            row["direction"] == "b2c"
            and row.get("answers") == "FETCH"
            and row["offset"] is not None
        ):
            conn = truth_conn[row["conn_id"]]
            key = (conn, row["topic"], row["partition"], row["offset"], row["max_size"])
            found = ours[(row["conn_id"], row["stream_offset"])]
            assert found in [sent[(conn, seq)] for seq in requests[key]], row
    every = {(m["sha256"]) for m in truth["fetched"]}
    assert {m["payload_sha256"] for m in decoded.sink.messages if m["direction"] == "b2c"} <= every


@pytest.mark.parametrize("name", DERIVED)
def test_derived_captures_pair_responses_only_with_their_own_request(name):
    truth, decoded = load(name)
    assert_pairs_only_with_their_own_request(truth, decoded)
    responses = [r for r in decoded.sink.frames if r["direction"] == "b2c"]
    assert responses[-1].get("answers")  # pairing resumed after the loss
    unpaired = [r for r in responses if not r.get("answers")]
    assert all(
        m["offset"] is None
        for m in decoded.sink.messages
        if m["stream_offset"] in {r["stream_offset"] for r in unpaired} and m["direction"] == "b2c"
    )


@pytest.mark.parametrize("name", RECORDED)
def test_random_segment_loss_and_late_starts_never_mispair(name):
    """Our own derived variants of every recording: packets dropped at random, or the
    capture begun later; whatever decodes must still be true."""
    rng = random.Random(name)
    packets = json.loads((SAMPLES / f"{name}.truth.json").read_text())["capture"]["packets"]
    for _ in range(8):
        if rng.random() < 0.6:
            lost = frozenset(rng.sample(range(4, packets + 1), min(4, packets - 3)))
            truth, decoded = load(name, partial(_not_in, lost))
        else:
            truth, decoded = load(name, partial(operator.le, rng.randrange(2, 30)))
        assert_pairs_only_with_their_own_request(truth, decoded)
        # every loss is explained (no response is blamed for a request that was lost)
        kinds = {a["kind"] for a in decoded.sink.anomalies}
        assert kinds <= {"resync", "truncated_frame", "pairing_lost"}


def _not_in(dropped: frozenset[int], index: int) -> bool:
    return index not in dropped


# -- content detection must not claim other traffic ----------------------------------------


def tcp_streams(path: Path) -> dict[tuple, bytes]:
    """Every direction's TCP payload bytes of an Ethernet capture, concatenated."""
    streams: dict[tuple, bytearray] = defaultdict(bytearray)
    with path.open("rb") as handle:
        reader = dpkt.pcap.Reader(handle)
        if reader.datalink() != dpkt.pcap.DLT_EN10MB:
            return {}
        for _, buf in reader:
            ip = dpkt.ethernet.Ethernet(buf).data
            if isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6) and isinstance(ip.data, dpkt.tcp.TCP):
                tcp = ip.data
                streams[(ip.src, tcp.sport, ip.dst, tcp.dport)] += tcp.data
    return {key: bytes(data) for key, data in streams.items()}


def test_real_pulsar_traffic_is_never_taken_for_kafka07():
    """Registry-sized windows of every recorded Pulsar stream, from its start and inside it."""
    windows = 0
    for path in sorted(SAMPLES.glob("pulsar_*.pcap")):
        for data in tcp_streams(path).values():
            for start in range(0, len(data), 64 * 1024):
                window = data[start : start + 256 * 1024]
                windows += 1
                assert not looks_like_request(window) and not looks_like_response(window)
                assert not find_request_start(window, 0, 5 << 20).confirmed
                assert not find_response_start(window, 0, 5 << 20).confirmed
    assert windows > 20
