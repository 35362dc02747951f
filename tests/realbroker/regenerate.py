"""Regenerate the real-broker samples: ``python -m tests.realbroker.regenerate [NAME ...]``.

Builds the programs (tests/realbroker/build.py), starts the real Pulsar standalone once per
broker configuration, and for each scenario: tcpdump on the broker's port, the broker's
stats and counters sampled, the Java, Go or Python client run; then writes ``NAME.pcap``,
``NAME.truth.json``, ``NAME.stats.jsonl`` and ``NAME.counters.jsonl`` and the versions
record. Needs root (tcpdump), a JDK 17, Maven and Go.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
from collections import Counter
from itertools import groupby
from pathlib import Path

from fuzz.pcapfile import read_pcap, tcp_segment, write_pcap
from tests.corpus.regenerate import ATTEMPTS, DroppedPackets, write_json
from tests.corpus.tcpdump import CaptureOptions, Tcpdump
from tests.realbroker.broker import Standalone
from tests.realbroker.build import Programs, build
from tests.realbroker.scenarios import BY_NAME, GO, JAVA, SCENARIOS, RealScenario
from tests.realbroker.stats import StatsSampler
from tests.realbroker.truth import build_truth

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_pcaps"
VERSIONS = "realpulsar_versions.json"
CLIENT_TIMEOUT_S = 300
JAVA_CLIENT_OPTIONS = ["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def client_command(
    programs: Programs, scenario: RealScenario, broker: Standalone, record: Path
) -> list[str]:
    args = [scenario.scenario, broker.service_url, broker.admin_url, scenario.topic_prefix]
    if scenario.client == JAVA:
        assert programs.java_classpath is not None
        java = ["java", *JAVA_CLIENT_OPTIONS, "-cp", programs.java_classpath]
        java.append("pwcap.realbroker.Scenarios")
        return [*java, *args, str(record)]
    if scenario.client == GO:
        assert programs.go_binary is not None
        return [str(programs.go_binary), *args, str(record)]
    return [sys.executable, "-m", "tests.realbroker.python_scenarios", *args, str(record)]


def keep_whole_connections(pcap: Path) -> dict[str, int]:
    """Drop the packets of connections opened before the capture started; return them.

    Those are the broker's own client talking to the broker (it reads the namespace's
    policies over the binary protocol) and its keep-alives; a sample holds the scenario's
    connections whole, from their handshake on.
    """
    capture = read_pcap(pcap)
    segments = [tcp_segment(record) for record in capture.records]
    opened = {frozenset((s.src, s.dst)) for s in segments if s is not None and s.syn}
    kept, dropped = [], Counter()
    for record, segment in zip(capture.records, segments, strict=True):
        if segment is not None and frozenset((segment.src, segment.dst)) not in opened:
            dropped[" <-> ".join(sorted((segment.src, segment.dst)))] += 1
        else:
            kept.append(record)
    if dropped:
        write_pcap(pcap, dataclasses.replace(capture, records=kept))
    return dict(sorted(dropped.items()))


def capture_once(
    programs: Programs, scenario: RealScenario, broker: Standalone, out_dir: Path
) -> dict:
    pcap = out_dir / f"{scenario.name}.pcap"
    options = CaptureOptions()
    with tempfile.TemporaryDirectory() as work:
        record_path = Path(work) / "record.json"
        command = client_command(programs, scenario, broker, record_path)
        sampler = StatsSampler(broker.admin_url, broker.metrics_url, scenario.topic_prefix)
        with Tcpdump(pcap, broker.port, options) as tcpdump, sampler:
            subprocess.run(command, check=True, timeout=CLIENT_TIMEOUT_S, cwd=REPO)
        record = json.loads(record_path.read_text())
    stats = tcpdump.stats
    assert stats is not None
    if stats.dropped_by_kernel:
        raise DroppedPackets(f"{scenario.name}: tcpdump dropped {stats.dropped_by_kernel} packets")
    sampler.write(*(out_dir / f"{scenario.name}.{kind}.jsonl" for kind in ("stats", "counters")))
    left_out = keep_whole_connections(pcap)
    capture = {
        "file": pcap.name,
        "format": "pcap",
        "port": broker.port,
        "interface": options.interface,
        "linktype": "default",
        "snaplen": 262144,
        "packets": stats.captured - sum(left_out.values()),
        "dropped_by_kernel": stats.dropped_by_kernel,
        "connections_left_out": left_out,
    }
    described = {
        "scenario": scenario.name,
        "description": scenario.description,
        "broker_config": scenario.broker_config,
        "broker_version": broker.version(),
        "stats": f"{scenario.name}.stats.jsonl",
        "stats_samples": len(sampler.samples),
        "counters": f"{scenario.name}.counters.jsonl",
        "counters_samples": len(sampler.counters),
    }
    truth = build_truth(described, capture, pcap, f"127.0.0.1:{broker.port}", record)
    write_json(out_dir / f"{scenario.name}.truth.json", truth)
    return truth


def capture_scenario(
    programs: Programs, scenario: RealScenario, broker: Standalone, out_dir: Path
) -> dict:
    """Capture a scenario, retrying when the kernel dropped packets (a busy machine)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return capture_once(programs, scenario, broker, out_dir)
        except DroppedPackets as error:
            print(f"{error}; attempt {attempt} of {ATTEMPTS}")
    raise RuntimeError(f"{scenario.name}: tcpdump kept dropping packets")


def regenerate(chosen: list[RealScenario], out_dir: Path) -> list[dict]:
    """Capture the chosen scenarios, one broker start per broker group."""
    programs = build({s.client for s in chosen})
    truths = []
    by_group = sorted(chosen, key=lambda s: s.broker_group)
    for (config, own), group in groupby(by_group, key=lambda s: s.broker_group):
        with Standalone(programs.broker_classpath, config, warm_up=not own) as broker:
            for scenario in group:
                truth = capture_scenario(programs, scenario, broker, out_dir)
                packets, frames = truth["capture"]["packets"], truth["frames_total"]
                print(f"{scenario.name}: {packets} packets, {frames} frames")
                truths.append(truth)
    return truths


def versions(truths: list[dict]) -> dict:
    """The versions every sample was made with (the broker's, each client's, the runtimes)."""
    out: dict[str, str] = {}
    for truth in truths:
        out["pulsar_broker"] = truth["broker_version"]
        client = truth["client"]
        out[f"{client['client']}_client"] = f"{client['client_library']} {client['client_version']}"
        for runtime in ("java_version", "java_vm", "go_version", "python_version"):
            if runtime in client:
                out[runtime] = client[runtime]
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="scenarios to capture (default: all)")
    parser.add_argument("--out", type=Path, default=SAMPLES)
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.names] if args.names else SCENARIOS
    args.out.mkdir(parents=True, exist_ok=True)
    truths = regenerate(chosen, args.out)
    record = args.out / VERSIONS
    known = json.loads(record.read_text()) if record.exists() else {}
    write_json(record, {**known, **versions(truths)})


if __name__ == "__main__":
    main()
