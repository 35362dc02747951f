"""The benchmarks' synthetic captures are traffic pwcap must decode cleanly.

A benchmark is only meaningful while its capture is well-formed: a generator that writes
impossible TCP (an ACK running ahead of the data) or a miscounted frame total would make
the figures measure anomaly handling instead of decoding.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from pwcap.capture import CaptureStats, read_streams
from pwcap.decode.driver import decode_captures

from tests.bench_scripts import load_bench
from tests.stream_sink import RecordingSink


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
    bench = load_bench("bench_real_clients")
    samples = bench.real_client_samples()
    replica = bench.Replica(copies=2, samples=samples)
    capture = tmp_path / "real.pcap"
    bench.write_replica(capture, replica)

    summary = decode_captures([capture], tmp_path / "out")

    assert summary.rows["frames"] == 2 * sum(sample.frames for sample in samples)
    assert summary.rows["connections"] == 2 * len(samples)  # each copy on ports of its own
    assert summary.anomalies == {}
