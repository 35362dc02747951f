"""What pwcap prints from a capture whose names attack the terminal of whoever reads it.

`tests/hostile/pulsar_hostile_names.pcap` is a real capture of the official Python client
(`tests/corpus/scenarios.py`: `hostile_names`) whose topic, subscription, producer and
consumer names, keys and properties carry ESC[2J (clear the screen), an OSC title sequence
ending in BEL, CR, newlines that forge whole frame lines, and 10,000-character names.
Every byte each command prints must be inert on a terminal, every name recognisable in
its escaped form, and the tables must keep the exact names the client sent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.cli import main
from pwcap.tables.printable import NAME_LIMIT
from tests.corpus.scenarios import LONG_NAME

HOSTILE = Path(__file__).resolve().parent / "hostile"
CAPTURE = HOSTILE / "pulsar_hostile_names.pcap"
TRUTH = json.loads((HOSTILE / "pulsar_hostile_names.truth.json").read_text())
LONGEST_LINE = 2_000  # characters: every name is cut, so no line comes near a 10,000 one

# The names as tshark shows such text: each control character as a visible escape.
TOPIC = "persistent://public/default/hostile\\x1b[2Jtopic"
OPENS = "sub\\x1b]0;pwned\\a"  # the subscription: a title sequence, then 10,000 characters
SUBSCRIPTION = OPENS + "n" * (NAME_LIMIT - 1 - len(OPENS)) + "…"
FORGED = "\\n     1    0.000000                   1 -> SEND                         forged"
PRODUCER = f"producer{FORGED}"
CONSUMER = f"consumer\\rOVERWRITTEN{FORGED}"
LONG_CUT = "n" * (NAME_LIMIT - 1) + "…"

# What a terminal acts on: C0 controls but the line feed, DEL, C1 controls (CSI is one),
# Unicode's line and paragraph separators and its bidirectional overrides.
ACTIVE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
FRAME_LINE = re.compile(r" {0,5}\d+ +\d+\.\d{6} +\d+ (->|<-) [A-Z_]+")


def inert(output: bytes) -> list[str]:
    """The lines of ``output`` after checking every byte of it: UTF-8, nothing a terminal
    acts on but line feeds, no line of a 10,000-character name."""
    text = output.decode("utf-8")
    assert ACTIVE.findall(text) == []
    lines = text.splitlines()
    assert max((len(line) for line in lines), default=0) <= LONGEST_LINE
    return lines


def run(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[list[str], list[str]]:
    """pwcap's exit status must be 0; its standard output and error, checked, as lines."""
    assert main(list(argv)) == 0
    captured = capsysbinary.readouterr()
    return inert(captured.out), inert(captured.err)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "dataset"
    assert main(["decode", "-q", str(CAPTURE), "-o", str(out)]) == 0
    return out


def test_the_capture_carries_the_hostile_names_the_client_sent():
    """The premise: the official client put these names on the wire unchanged."""
    sent = {(m["topic"], m["producer_name"]) for m in TRUTH["sent"]}
    assert {name for _, name in sent} == {f"producer{FORGED}".replace("\\n", "\n"), LONG_NAME}
    assert {m["subscription"] for m in TRUTH["received"]} == {f"sub\x1b]0;pwned\x07{LONG_NAME}"}


def test_show_prints_one_line_per_frame_with_every_name_escaped(capsysbinary):
    lines, errors = run(capsysbinary, "show", str(CAPTURE))
    assert errors == []
    assert all(FRAME_LINE.match(line) for line in lines), lines
    numbers = [int(line.split()[0]) for line in lines]
    assert numbers == list(range(1, TRUTH["frames_total"] + 1))  # no forged frame line
    text = "\n".join(lines)
    assert f"topic={TOPIC} " in text
    assert f"sub={SUBSCRIPTION} " in text
    assert f"producer={PRODUCER}" in text
    assert f"consumer={CONSUMER}" in text
    assert f"producer={LONG_CUT}" in text


def test_show_of_the_dataset_prints_what_show_of_the_capture_prints(capsysbinary, dataset):
    from_capture, _ = run(capsysbinary, "show", str(CAPTURE))
    from_dataset, _ = run(capsysbinary, "show", str(dataset))
    assert from_dataset == from_capture


def test_decode_prints_its_summary_inert_and_the_tables_keep_the_exact_names(
    capsysbinary, tmp_path
):
    out = tmp_path / "dataset"
    lines, errors = run(capsysbinary, "decode", str(CAPTURE), "-o", str(out))
    assert errors == []
    assert lines[-1] == f"written to   {out}"
    frames = pq.read_table(out / "frames").to_pylist()
    assert {f["producer_name"] for f in frames} - {None} == {
        m["producer_name"] for m in TRUTH["sent"]
    }
    assert {f["subscription"] for f in frames} - {None} == {
        m["subscription"] for m in TRUTH["received"]
    }
    assert {f["consumer_name"] for f in frames} - {None} == {
        m["consumer_name"] for m in TRUTH["received"]
    }
    messages = pq.read_table(out / "messages").to_pylist()
    sent = [dict(m["properties"]) for m in TRUTH["sent"]]
    published = [dict(m["properties"]) for m in messages if m["direction"] == "c2b"]
    assert published == sent


def test_analyze_names_the_starved_and_redelivered_subscription_escaped(
    spark, capsysbinary, dataset, tmp_path
):
    lines, _ = run(capsysbinary, "analyze", str(dataset), "-o", str(tmp_path / "analytics"))
    text = "\n".join(lines)
    assert f"({SUBSCRIPTION}): " in text  # the starved consumer
    assert f"  {TOPIC} / {SUBSCRIPTION}: " in text  # the redelivered subscription
    # The findings last: the redelivery's sentence names the topic and subscription.
    (finding,) = [line for line in lines if line.startswith("  1. [high] redelivery")]
    assert f" of {TOPIC} / {OPENS}nnn" in finding and finding.endswith("…")
    report = tmp_path / "report.html"
    lines, errors = run(
        capsysbinary, "report", str(dataset), "--analytics", str(tmp_path / "analytics"),
        "-o", str(report),
    )  # fmt: skip
    assert errors == [] and len(lines) == 1
