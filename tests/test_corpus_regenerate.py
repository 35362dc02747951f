"""One small scenario regenerated end to end: broker, tcpdump, the official client.

Needs root and tcpdump (as `python -m tests.corpus.regenerate` does); skipped otherwise.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
from pathlib import Path

import dpkt
import pytest

from tests.corpus.regenerate import capture_scenario, capture_with_delay
from tests.corpus.scenarios import SCENARIOS
from tests.corpus.streams import captured_commands, journal_commands, read_packets
from tests.corpus.truth import read_journal

CAN_CAPTURE = os.geteuid() == 0 and shutil.which("tcpdump") is not None
CAN_DELAY = CAN_CAPTURE and shutil.which("ip") is not None and Path("/dev/net/tun").exists()


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


@pytest.mark.skipif(not CAN_DELAY, reason="a delayed link needs root, ip, tcpdump and TUN")
def test_a_delayed_link_holds_every_packet_its_delay_each_way(tmp_path: Path) -> None:
    """The slow-network scenario through its two namespaces and the delay line: every
    packet captured at the client crossed the link, held at least the delay asked for,
    so the broker's SYN-ACK comes back two delays after the client's SYN."""
    scenario = next(s for s in SCENARIOS if s.delay_ms)
    truth = capture_with_delay(scenario, tmp_path)
    link = truth["link"]
    there, back = link["client_to_broker_us"], link["broker_to_client_us"]
    assert len(there) + len(back) == truth["capture"]["packets"]
    assert min(there + back) >= scenario.delay_ms * 1000
    packets = list(read_packets(tmp_path / f"{scenario.name}.pcap"))
    syn, syn_ack = packets[0], packets[1]
    assert (syn.flags, syn_ack.flags) == (dpkt.tcp.TH_SYN, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)
    # Captured before the link read it and as it wrote the answer: at least both holds.
    assert syn_ack.ts - syn.ts >= (there[0] + back[0]) / 1e6
    journal = read_journal(tmp_path / f"{scenario.name}.broker.jsonl")
    assert captured_commands(tmp_path / f"{scenario.name}.pcap") == journal_commands(journal)
