"""Which captures a run decodes and what each is called in the dataset.

Rows of many captures must never mix: ``capture`` is the path below the argument that
named the file (two brokers' ``trace.pcap`` stay apart) and ``conn_id`` is unique per
(capture, connection), the same in every run. Folders are read by content, so
tcpdump's rotated files count and other files are listed as skipped, with the reason.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pwcap.cli import main
from pwcap.decode.driver import decode_captures
from pwcap.decode.inputs import InputError, expand_inputs

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
PLAIN = SAMPLES / "pulsar_plain.pcap"
KAFKA = SAMPLES / "kafka07_plain.pcap"
PCAPNG = SAMPLES / "pulsar_derived_pcapng.pcapng"


def rows(out: Path, table: str, *columns: str) -> list[dict]:
    return ds.dataset(out / table).to_table(columns=list(columns)).to_pylist()


def test_rotated_files_are_decoded_by_content_and_other_files_listed_as_skipped(tmp_path):
    """``-C`` appends a number, ``-G`` names files by strftime: neither ends in .pcap.
    ``trace.pcap`` and ``trace.pcap1`` are one series, decoded as one capture."""
    folder = tmp_path / "caps"
    folder.mkdir()
    shutil.copy(PLAIN, folder / "trace.pcap")
    shutil.copy(KAFKA, folder / "trace.pcap1")
    shutil.copy(PCAPNG, folder / "broker-2026-11-22_15:00:00")
    (folder / "trace.pcap2.gz").write_bytes(gzip.compress(PLAIN.read_bytes()))
    (folder / "notes.txt").write_text("what we captured and why\n")
    (folder / "notes.txt.gz").write_bytes(gzip.compress(b"what we captured and why\n" * 500))
    (folder / "empty.pcap").write_bytes(b"")
    inputs = expand_inputs([str(folder)])
    assert [c.name for c in inputs.captures] == [
        "broker-2026-11-22_15:00:00",
        "trace.pcap",
        "trace.pcap2.gz",
    ]
    assert {path.name: reason for path, reason in inputs.skipped} == {
        "empty.pcap": "empty file, not a pcap or pcapng capture",
        "notes.txt": "not a pcap or pcapng capture (starts with 77 68 61 74)",
        "notes.txt.gz": "not a pcap or pcapng capture (starts with 77 68 61 74)",
    }
    done = subprocess.run(
        [sys.executable, "-m", "pwcap.cli", "decode", str(folder), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    skipped_line = next(line for line in done.stdout.splitlines() if line.startswith("skipped"))
    assert (
        "3 files" in skipped_line and "notes.txt" in skipped_line and "empty.pcap" in skipped_line
    )
    assert {r["capture"] for r in rows(tmp_path / "o", "connections", "capture")} == {
        "broker-2026-11-22_15:00:00",
        "trace.pcap",
        "trace.pcap2.gz",
    }


def test_a_folder_of_nothing_but_other_files_is_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("no packets here")
    with pytest.raises(InputError, match="no capture files"):
        expand_inputs([str(tmp_path)])


def test_the_capture_column_keeps_the_path_below_the_folder_given(tmp_path):
    for host in ("host1", "host2"):
        (tmp_path / "caps" / host).mkdir(parents=True)
        shutil.copy(PLAIN, tmp_path / "caps" / host / "trace.pcap")
    out = tmp_path / "out"
    decode_captures([tmp_path / "caps"], out)
    connections = rows(out, "connections", "capture", "conn_id")
    assert sorted(r["capture"] for r in connections) == ["host1/trace.pcap", "host2/trace.pcap"]
    assert len({r["conn_id"] for r in connections}) == 2  # one connection, two captures
    frames = rows(out, "frames", "capture", "conn_id")
    by_capture = {r["capture"]: r["conn_id"] for r in connections}
    assert all(by_capture[r["capture"]] == r["conn_id"] for r in frames)


def test_files_of_the_same_name_given_apart_keep_enough_of_their_path(tmp_path):
    for host in ("host1", "host2"):
        (tmp_path / host).mkdir()
        shutil.copy(PLAIN, tmp_path / host / "trace.pcap")
    inputs = expand_inputs([str(tmp_path / "host1/trace.pcap"), str(tmp_path / "host2/trace.pcap")])
    assert [c.name for c in inputs.captures] == ["host1/trace.pcap", "host2/trace.pcap"]


def test_a_glob_names_captures_below_its_fixed_part(tmp_path):
    (tmp_path / "caps" / "a").mkdir(parents=True)
    shutil.copy(PLAIN, tmp_path / "caps" / "a" / "x.pcap")
    inputs = expand_inputs([f"{tmp_path}/caps/*/*.pcap"])
    assert [c.name for c in inputs.captures] == ["a/x.pcap"]


def test_connection_ids_are_stable_across_runs_and_unique_across_captures(tmp_path):
    """The sample folder holds captures and derived copies of the same connections."""
    first, again = tmp_path / "first", tmp_path / "again"
    decode_captures([SAMPLES], first)
    decode_captures([SAMPLES], again)
    ids = [(r["capture"], r["conn_id"]) for r in rows(first, "connections", "capture", "conn_id")]
    assert sorted(ids) == sorted(
        (r["capture"], r["conn_id"]) for r in rows(again, "connections", "capture", "conn_id")
    )
    assert len({conn_id for _, conn_id in ids}) == len(ids)
    assert all(0 <= conn_id < 2**63 for _, conn_id in ids)


def test_standard_input_is_a_capture_named_dash(tmp_path):
    """``tcpdump -w - | pwcap decode - -o out``: the same rows as the file gives."""
    from_pipe, from_file = tmp_path / "pipe", tmp_path / "file"
    with open(PLAIN, "rb") as capture:
        done = subprocess.run(
            [sys.executable, "-m", "pwcap.cli", "decode", "-", "-o", str(from_pipe)],
            stdin=capture,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert main(["decode", str(PLAIN), "-o", str(from_file), "-q"]) == 0
    columns = ("ts", "direction", "command", "stream_offset", "frame_size")
    piped = rows(from_pipe, "frames", "capture", *columns)
    assert {r.pop("capture") for r in piped} == {"-"}
    filed = rows(from_file, "frames", *columns)
    assert piped == filed and len(filed) > 100
