"""The benchmarks' synthetic captures are traffic pwcap must decode cleanly.

A benchmark is only meaningful while its capture is well-formed: a generator that writes
impossible TCP (an ACK running ahead of the data) or a miscounted frame total would make
the figures measure anomaly handling instead of decoding.
"""

from __future__ import annotations

from itertools import pairwise

import dpkt
import pyarrow.parquet as pq
import pytest

from fuzz.stream_sink import RecordingSink
from pwcap.capture import CaptureStats, read_streams
from pwcap.decode.driver import decode_captures
from tests.bench_scripts import load_bench


@pytest.mark.parametrize("shape", ["small", "large"])
def test_the_decode_benchmark_capture_decodes_every_frame_without_anomalies(tmp_path, shape):
    bench = load_bench("bench_decode")
    capture = tmp_path / f"{shape}.pcap"
    frames = bench.write_capture(capture, shape, 3_000_000)

    summary = decode_captures([capture], tmp_path / "out")

    assert summary.rows["frames"] == frames
    assert summary.anomalies == {}
    messages = pq.read_table(tmp_path / "out" / "messages", columns=["checksum_ok"])
    assert messages.num_rows > 0
    assert messages.column("checksum_ok").to_pylist() == [True] * messages.num_rows


def test_the_capture_benchmark_streams_have_no_gaps(tmp_path):
    bench = load_bench("bench_capture")
    capture = tmp_path / "capture.pcap"
    bench.generate(capture, 20_000, connections=20)
    sink = RecordingSink()
    stats = CaptureStats()

    read_streams(capture, sink, stats=stats)

    assert len(sink.connections) == 20
    assert all(recorded.close_reason == "fin" for recorded in sink.connections.values())
    assert stats.duplicates > 0  # the generator repeats some packets (taken once)...
    for recorded in sink.connections.values():  # ...and swaps some, yet nothing is lost
        assert [stream.gaps for stream in recorded.streams] == [[], []]


def test_the_real_client_benchmark_capture_is_every_sample_once_per_copy(tmp_path):
    replica = load_bench("replica")
    samples = replica.real_client_samples()
    capture = tmp_path / "real.pcap"
    replica.write_replica(capture, replica.Replica(copies=2, samples=samples))

    summary = decode_captures([capture], tmp_path / "out")

    assert summary.rows["frames"] == 2 * sum(sample.frames for sample in samples)
    assert summary.rows["messages"] == 2 * sum(sample.messages for sample in samples)
    assert summary.rows["connections"] == 2 * sum(_connections(sample) for sample in samples)
    assert summary.anomalies == {}


def _connections(sample) -> int:
    """Connections the sample's clients opened: one SYN each."""
    return sum(
        1
        for _, frame in sample.packets
        if frame.data.data.flags & dpkt.tcp.TH_SYN and not frame.data.data.flags & dpkt.tcp.TH_ACK
    )


SHAPES = load_bench("bench_shapes")


@pytest.mark.parametrize("shape", list(SHAPES.RECORDINGS))
def test_a_shape_is_copies_of_its_recording_one_after_another(tmp_path, shape):
    replica = load_bench("replica")
    recording, _ = SHAPES.RECORDINGS[shape]
    sample = replica.load_sample(recording)
    capture = tmp_path / f"{shape}.pcap"
    replica.write_replica(capture, replica.Replica(3, [sample], one_after_another=True))

    summary = decode_captures([capture], tmp_path / "out")

    assert summary.rows["frames"] == 3 * sample.frames  # the truth file's count
    assert summary.rows["messages"] == 3 * sample.messages  # the broker journal's count
    assert summary.rows["connections"] == 3
    assert summary.anomalies == {}
    connections = pq.read_table(tmp_path / "out" / "connections").to_pylist()
    spans = sorted((row["first_ts"], row["last_ts"]) for row in connections)
    assert all(first[1] < second[0] for first, second in pairwise(spans))  # no overlap


def test_a_shape_capture_is_the_same_bytes_each_time_it_is_made(tmp_path):
    replica = load_bench("replica")
    sample = replica.load_sample(SHAPES.RECORDINGS["entry-metadata"][0])
    made = []
    for name in ("first.pcap", "second.pcap"):
        replica.write_replica(tmp_path / name, replica.Replica(4, [sample], one_after_another=True))
        made.append((tmp_path / name).read_bytes())
    assert made[0] == made[1]
