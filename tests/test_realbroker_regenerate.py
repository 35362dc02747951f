"""One real-broker scenario regenerated end to end: Maven builds the Pulsar standalone and
the Java client's scenarios from Maven Central, the broker starts on loopback, tcpdump
captures the Java client's slow-consumer scenario while the broker's stats and counters
are sampled, and the result decodes exactly.

Run when a new Pulsar release comes out (change pulsar.version in the two poms):
``.venv/bin/pytest -m slow tests/test_realbroker_regenerate.py``. Needs root, tcpdump, a
JDK 17 and Maven (the Go scenarios are not built for it); skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from pwcap.capture import read_streams
from pwcap.decode.api import DecodeOptions
from tests.pulsar_frames import DecodingStreams
from tests.realbroker.regenerate import regenerate
from tests.realbroker.scenarios import BY_NAME

TOOLS = ("tcpdump", "javac", "mvn")
CAN_RUN = os.geteuid() == 0 and all(shutil.which(tool) for tool in TOOLS)


@pytest.mark.slow
@pytest.mark.skipif(not CAN_RUN, reason=f"needs root and {', '.join(TOOLS)}")
def test_java_slow_consumer_regenerates_and_decodes_exactly(tmp_path: Path) -> None:
    (truth,) = regenerate([BY_NAME["realpulsar_java_slow_consumer"]], tmp_path)
    assert truth["broker_version"].startswith("4.")
    assert truth["capture"]["dropped_by_kernel"] == 0
    assert [m["action"] for m in truth["received"]] == ["ack"] * 60
    streams = DecodingStreams(DecodeOptions(capture="regenerated"))
    read_streams(tmp_path / truth["capture"]["file"], streams, {truth["capture"]["port"]})
    counted: dict[str, Counter] = defaultdict(Counter)
    for row in streams.sink.frames:
        counted[row["direction"]][row["command"]] += 1
    assert {d: dict(c) for d, c in counted.items()} == truth["frames"]
    assert streams.sink.anomalies == []
    delivered = [m for m in streams.sink.messages if m["command"] == "MESSAGE"]
    assert sorted(m["payload_sha256"] for m in delivered) == sorted(
        m["sha256"] for m in truth["received"]
    )
    assert (tmp_path / truth["stats"]).stat().st_size > 0
    counted = [json.loads(line) for line in (tmp_path / truth["counters"]).open()]
    acks = [c["acks"] for sample in counted for c in sample["consumers"]]
    assert acks and max(acks) <= 60
