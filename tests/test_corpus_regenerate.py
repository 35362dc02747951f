"""One small scenario regenerated end to end: broker, tcpdump, the official client.

Needs root and tcpdump (as `python -m tests.corpus.regenerate` does); skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
from pathlib import Path

import pytest

from tests.corpus.regenerate import capture_scenario
from tests.corpus.scenarios import SCENARIOS
from tests.corpus.streams import captured_commands, journal_commands
from tests.corpus.truth import read_journal

CAN_CAPTURE = os.geteuid() == 0 and shutil.which("tcpdump") is not None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.skipif(not CAN_CAPTURE, reason="capturing needs root and tcpdump")
def test_small_scenario_regenerates_into_a_matching_capture_and_truth(tmp_path: Path) -> None:
    template = next(s for s in SCENARIOS if s.name == "pulsar_ipv6")
    scenario = dataclasses.replace(
        template, name="e2e", host="127.0.0.1", hostname=None, port=free_port()
    )
    truth = capture_scenario(scenario, tmp_path)
    assert truth["capture"]["packets"] > 0
    assert truth["capture"]["dropped_by_kernel"] == 0
    assert len(truth["sent"]) == 10
    assert [m["action"] for m in truth["received"]] == ["ack"] * 10
    journal = read_journal(tmp_path / "e2e.broker.jsonl")
    assert captured_commands(tmp_path / "e2e.pcap") == journal_commands(journal)
