"""``pwcap decode`` and ``pwcap show`` as a user runs them.

A few behaviours that depend on the process (exit status, what reaches stderr, no
traceback, nothing left behind) run the real command in a subprocess; the rest call the
CLI in-process, which is the same code without the interpreter start-up.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.cli import main
from pwcap.decode.driver import Progress, decode_captures
from tests.pulsar_frames import command, frame

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
PLAIN = SAMPLES / "pulsar_plain.pcap"
PLAIN_TRUTH = json.loads((SAMPLES / "pulsar_plain.truth.json").read_text())


def pwcap(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pwcap.cli", *args], capture_output=True, text=True, timeout=120
    )


def table(out: Path, name: str) -> list[dict]:
    return pq.read_table(out / name).to_pylist()


# -- unusable input: one line, non-zero, nothing written ---------------------------------------


def test_a_file_that_is_not_a_capture_is_one_line_and_nothing_is_written(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("these are not packets\n" * 100)
    done = pwcap("decode", str(notes), "-o", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("pwcap decode: error:") and done.stderr.count("notes.txt") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_capture_among_good_ones_that_is_not_one_stops_the_run_before_writing(tmp_path):
    bogus = tmp_path / "bogus.pcap"
    bogus.write_bytes(b"\x00" * 64)
    done = pwcap("decode", str(PLAIN), str(bogus), "-o", str(tmp_path / "out"))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "bogus.pcap" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bogus.pcap"]


@pytest.mark.parametrize(
    ("given", "says"),
    [("missing.pcap", "no such file"), ("nothing/*.pcap", "no file matches")],
)
def test_missing_inputs_are_one_line_errors(tmp_path, capsys, given, says):
    assert main(["decode", str(tmp_path / given), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err
    assert not (tmp_path / "out").exists()


def test_an_empty_folder_is_an_error(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["decode", str(tmp_path / "empty"), "-o", str(tmp_path / "out")]) == 1
    assert "no capture files" in capsys.readouterr().err


# -- the dataset: overwrite, interruption, inputs ------------------------------------------------


def test_an_existing_dataset_is_replaced_only_with_overwrite(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["decode", str(PLAIN), "-o", str(out), "--quiet"]) == 0
    other = SAMPLES / "pulsar_chunked.pcap"
    assert main(["decode", str(other), "-o", str(out), "--quiet"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert {r["capture"] for r in table(out, "connections")} == {PLAIN.name}
    assert main(["decode", str(other), "-o", str(out), "--quiet", "--overwrite"]) == 0
    assert {r["capture"] for r in table(out, "connections")} == {other.name}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


class _InterruptAfterFirstCapture(Progress):
    """Ctrl-C arriving while the run is under way (between two captures here)."""

    def __init__(self) -> None:
        self.started = 0

    def capture(self, path, done_bytes, position) -> None:
        self.started += 1
        if self.started == 2:
            raise KeyboardInterrupt


def test_an_interrupted_run_leaves_no_dataset(tmp_path):
    progress = _InterruptAfterFirstCapture()
    inputs = [PLAIN, SAMPLES / "pulsar_chunked.pcap"]
    with pytest.raises(KeyboardInterrupt):
        decode_captures(inputs, tmp_path / "out", progress=progress)
    assert progress.started == 2
    assert list(tmp_path.iterdir()) == []


def test_folders_and_globs_are_expanded_and_each_capture_decoded_once(tmp_path):
    folder = tmp_path / "caps"
    folder.mkdir()
    for name in ("pulsar_plain.pcap", "pulsar_chunked.pcap", "kafka07_plain.pcap"):
        shutil.copy(SAMPLES / name, folder / name)
    out = tmp_path / "out"
    assert main(["decode", str(folder), str(folder / "pulsar_*.pcap"), "-o", str(out), "-q"]) == 0
    captures = [r["capture"] for r in table(out, "connections")]
    expected = {"pulsar_plain.pcap": 1, "pulsar_chunked.pcap": 0, "kafka07_plain.pcap": 0}
    for name in expected:
        truth = json.loads((SAMPLES / name.replace(".pcap", ".truth.json")).read_text())
        expected[name] = len(truth["connections"])
    assert {name: captures.count(name) for name in expected} == expected


# -- the summary and the progress bar ------------------------------------------------------------


def test_piped_output_is_the_summary_alone(tmp_path):
    done = pwcap("decode", str(PLAIN), "-o", str(tmp_path / "out"))
    assert done.returncode == 0
    assert done.stderr == ""  # no progress bar when stderr is not a terminal
    summary = done.stdout
    total = PLAIN_TRUTH["frames_total"]
    assert f"frames       {total:,} (" in summary
    sends = PLAIN_TRUTH["frames"]["c2b"]["SEND"]
    assert f"SEND {sends:,}" in summary
    assert "connections  1 (pulsar 1)" in summary
    assert "anomalies    0" in summary
    assert "MB/s" in summary and "frames/s" in summary


def test_quiet_prints_nothing(tmp_path, capsys):
    assert main(["decode", str(PLAIN), "-o", str(tmp_path / "out"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")


def test_the_folders_leading_to_a_new_dataset_are_created(tmp_path):
    out = tmp_path / "runs" / "today" / "dataset"
    assert main(["decode", str(PLAIN), "-o", str(out), "--quiet"]) == 0
    assert pq.read_table(out / "frames").num_rows == PLAIN_TRUTH["frames_total"]


# -- a capture cut off mid-record ---------------------------------------------------------------


def test_a_cut_off_capture_keeps_what_came_before_the_cut_and_exits_3(tmp_path):
    raw = PLAIN.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(raw[: len(raw) * 2 // 3 + 7])  # ends inside a record
    out = tmp_path / "out"
    done = pwcap("decode", str(cut), "-o", str(out))
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and "warning" in done.stderr
    frames = table(out, "frames")
    assert 0 < len(frames) < PLAIN_TRUTH["frames_total"]
    assert [a["kind"] for a in table(out, "anomalies")].count("truncated_capture") == 1


# -- what is and is not written ------------------------------------------------------------------


SECRET = b"eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu.s1gnature"


def test_credentials_are_never_written_only_the_method_and_size(tmp_path, write_capture, capsys):
    connect = command(
        "CONNECT",
        client_version="Pulsar-Java-v3.1",
        protocol_version=21,
        auth_method_name="token",
        auth_data=SECRET,
    )
    connected = command("CONNECTED", server_version="Pulsar-Broker-v3.1", protocol_version=21)
    capture = write_capture(
        tmp_path / "auth.pcap", [(6650, [(0, frame(connect)), (1, frame(connected))])]
    )
    out = tmp_path / "out"
    assert main(["decode", str(capture), "-o", str(out), "-q", "--payloads"]) == 0
    (conn,) = table(out, "connections")
    assert conn["auth_method"] == "token" and conn["auth_data_size"] == len(SECRET)
    for name in ("frames", "messages", "connections", "anomalies"):
        text = repr(table(out, name))
        assert SECRET.decode() not in text and "c2VjcmV0" not in text, name
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_bytes()
    capsys.readouterr()
    assert main(["show", str(capture)]) == 0
    shown = capsys.readouterr().out
    assert "CONNECT" in shown and SECRET.decode() not in shown and "c2VjcmV0" not in shown


def test_payload_bytes_only_with_payloads(tmp_path):
    plain, full = tmp_path / "plain", tmp_path / "full"
    assert main(["decode", str(PLAIN), "-o", str(plain), "-q"]) == 0
    assert main(["decode", str(PLAIN), "-o", str(full), "-q", "--payloads"]) == 0
    assert all(m["payload"] is None for m in table(plain, "messages"))
    messages = table(full, "messages")
    assert len(messages) == len(PLAIN_TRUTH["sent"]) + len(PLAIN_TRUTH["received"])
    for m in messages:
        assert hashlib.sha256(m["payload"]).hexdigest() == m["payload_sha256"]
        assert len(m["payload"]) == m["payload_size"]


def test_frames_over_the_size_limit_are_anomalies(tmp_path):
    out = tmp_path / "out"
    chunked = SAMPLES / "pulsar_chunked.pcap"
    assert main(["decode", str(chunked), "-o", str(out), "-q", "--max-frame-size", "4K"]) == 0
    big = [f for f in table(out, "frames") if f["frame_size"] > 4096]
    assert big == []
    kinds = {a["kind"] for a in table(out, "anomalies")}
    assert "oversize_frame" in kinds


# -- pwcap show ------------------------------------------------------------------------------------


def test_show_prints_one_line_per_frame_with_filters(capsys):
    assert main(["show", str(PLAIN), "--command", "send", "--limit", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert all(" SEND " in line and " -> " in line for line in lines)
    numbers = [int(line.split()[0]) for line in lines]
    assert numbers == sorted(numbers) and numbers[0] > 1  # numbered as in the whole listing
    assert all("seq=" in line and "producer=" in line for line in lines)


def test_show_lists_every_frame_of_the_capture(capsys):
    assert main(["show", str(PLAIN)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == PLAIN_TRUTH["frames_total"]
    received = sum(PLAIN_TRUTH["frames"]["b2c"].values())
    assert sum(" <- " in line for line in lines) == received


def test_show_reads_a_dataset_the_same_way(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["decode", str(PLAIN), "-o", str(out), "-q"]) == 0
    capsys.readouterr()
    (conn,) = table(out, "connections")
    args = ["--conn", str(conn["conn_id"]), "--command", "FLOW", "ACK", "SEND_RECEIPT"]
    assert main(["show", str(PLAIN), *args]) == 0
    from_capture = capsys.readouterr().out
    assert main(["show", str(out), *args]) == 0
    from_dataset = capsys.readouterr().out
    assert from_capture.splitlines() and from_capture == from_dataset


def test_show_on_something_unusable_is_one_line(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a capture")
    done = pwcap("show", str(notes))
    assert done.returncode == 1 and done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr
