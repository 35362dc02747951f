"""Rotated captures decoded as one timeline: a capture that tcpdump split into files in
the middle of its connections gives the dataset of the unsplit capture, under the name
of the series, whichever way the files are named (``-C``, a ``-W`` ring, ``-G`` with
``--series``) and however many workers decode it."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest

from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import decode_captures
from pwcap.decode.inputs import expand_inputs
from pwcap.decode.parallel import decode_parallel
from tests.test_decode_jobs import assert_same_dataset

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
ORIGINAL = SAMPLES / "pulsar_shared_two_consumers.pcap"
_HEADER = 24  # a pcap file's global header
_RECORD = struct.Struct("<IIII")  # seconds, microseconds, captured length, original length


def split_pcap(source: Path, names: list[Path]) -> None:
    """Write the records of ``source`` into as many files as ``names``, in turn, each
    with the file header, as tcpdump -C does (cuts fall inside connections)."""
    raw = source.read_bytes()
    header, records, at = raw[:_HEADER], [], _HEADER
    while at < len(raw):
        length = _RECORD.unpack_from(raw, at)[2]
        records.append(raw[at : at + _RECORD.size + length])
        at += _RECORD.size + length
    per_file = -(-len(records) // len(names))
    for index, name in enumerate(names):
        name.write_bytes(header + b"".join(records[index * per_file : (index + 1) * per_file]))


@pytest.fixture
def unsplit(tmp_path: Path) -> Path:
    """The original capture decoded under the name the series will have."""
    folder = tmp_path / "unsplit"
    folder.mkdir()
    shutil.copy(ORIGINAL, folder / "trace.pcap")
    decode_captures([folder], tmp_path / "expected")
    return tmp_path / "expected"


@pytest.mark.parametrize(
    "written",
    [
        ["trace.pcap", "trace.pcap1", "trace.pcap2"],  # tcpdump -C
        ["trace.pcap2", "trace.pcap0", "trace.pcap1"],  # a -W ring that wrapped: 2 is oldest
    ],
)
@pytest.mark.parametrize("jobs", [1, 2])
def test_rotated_files_are_one_capture_with_the_rows_of_the_unsplit_one(
    tmp_path, unsplit, written, jobs
):
    folder = tmp_path / "rotated"
    folder.mkdir()
    split_pcap(ORIGINAL, [folder / name for name in written])
    [capture] = expand_inputs([str(folder)]).captures
    assert capture.name == "trace.pcap"
    assert [part.name for part in capture.parts] == written
    decode_parallel([folder], tmp_path / "out", jobs=jobs)
    assert_same_dataset(unsplit, tmp_path / "out")


@pytest.mark.parametrize("jobs", [1, 2])
def test_files_named_by_time_are_one_series_when_asked(tmp_path, unsplit, jobs):
    folder = tmp_path / "by_time"
    folder.mkdir()
    names = ["trace.pcap", "trace-10:05.pcap", "trace-10:10.pcap"]
    split_pcap(ORIGINAL, [folder / name for name in names])
    apart = expand_inputs([str(folder)]).captures
    assert len(apart) == 3  # -G names carry no number: separate captures unless told
    decode_parallel([folder], tmp_path / "out", jobs=jobs, options=DecodeOptions(series=True))
    assert_same_dataset(unsplit, tmp_path / "out")


def test_a_connection_split_across_files_is_half_connections_without_the_series(tmp_path):
    """What the series is for: decoded apart, the cut connections are counted twice."""
    names = [tmp_path / "a.pcap", tmp_path / "b.pcap"]
    split_pcap(ORIGINAL, names)
    apart = decode_captures(names, tmp_path / "apart")
    whole = decode_captures(names, tmp_path / "whole", DecodeOptions(series=True))
    assert sum(apart.connections.values()) > sum(whole.connections.values())


@pytest.mark.parametrize("by", ["path", "uri"])
def test_spark_tasks_read_a_series_as_one_capture(spark, tmp_path, unsplit, by):
    """Listed locally or through a filesystem URI, the files are one capture to a task."""
    pytest.importorskip("pyspark")
    from pwcap.decode.spark.listing import list_captures
    from pwcap.decode.spark.writing import write_dataset

    folder = tmp_path / "rotated"
    folder.mkdir()
    split_pcap(ORIGINAL, [folder / name for name in ("trace.pcap", "trace.pcap1")])
    captures, _ = list_captures([str(folder) if by == "path" else f"file://{folder}"])
    write_dataset(spark, captures, DecodeOptions(), str(tmp_path / "out"))
    assert_same_dataset(unsplit, tmp_path / "out")
