"""Regenerate the Kafka 0.7 samples: ``python -m tests.kafka07.regenerate [NAME ...]`` (root).

Installs the real clients first (``npm ci`` for franz-kafka, samsa into a Python 2.7
target folder), then for each scenario: start the test broker on loopback, start
tcpdump on the scenario's port, run the client, stop tcpdump, check it dropped nothing,
and write ``sample_pcaps/NAME.pcap``, ``NAME.truth.json`` and ``NAME.broker.jsonl``.
Then the derived captures (segment loss, mid-stream start) are cut from one of them.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from fuzz.pcapfile import read_pcap, write_pcap
from tests.corpus import derive
from tests.corpus.streams import reassemble
from tests.corpus.tcpdump import CaptureOptions, Tcpdump
from tests.kafka07.scenarios import (
    CLIENT_DIR,
    DERIVED_FROM,
    DERIVED_KINDS,
    HANDBUILT,
    SAMSA,
    SCENARIOS,
    Scenario,
)
from tests.kafka07.truth import build_truth
from tests.kafka07.wire_frames import frames_touched

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_pcaps"
SAMSA_DIR = CLIENT_DIR / "py27"  # samsa installed here (not committed)
SAMSA_REQUIREMENT = "samsa==0.3.11"
CLIENT_TIMEOUT_S = 60
ATTEMPTS = 3


def python27() -> str:
    """A Python 2.7 interpreter: $PWCAP_PYTHON27, python2.7 on PATH, or pyenv's."""
    candidates = [os.environ.get("PWCAP_PYTHON27"), shutil.which("python2.7")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/2.7*/bin/python2.7")))
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    raise RuntimeError("samsa needs Python 2.7: set PWCAP_PYTHON27")


def install_franz() -> None:
    """franz-kafka and its snappy binding (built with node-gyp) from the lock file."""
    subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=CLIENT_DIR, check=True)


def install_samsa() -> None:
    if not (SAMSA_DIR / "samsa").is_dir():
        command = [python27(), "-m", "pip", "install", "--no-deps", "--target", str(SAMSA_DIR)]
        subprocess.run([*command, SAMSA_REQUIREMENT], check=True)


def client_command(scenario: Scenario, port: int) -> tuple[list[str], dict[str, str], Path]:
    """The client's command line, environment and working directory."""
    script, *args = scenario.script_args
    args += ["127.0.0.1", str(port)]
    env = dict(os.environ)
    if scenario.client == HANDBUILT:
        return [sys.executable, "-m", script, *args], env, REPO
    if scenario.client == SAMSA:
        env["PYTHONPATH"] = str(SAMSA_DIR)
        return [python27(), script, *args], env, CLIENT_DIR
    return ["node", script, *args], env, CLIENT_DIR


class BrokerProcess:
    """The test broker in a child process, stopped when the scenario is done."""

    def __init__(self, scenario: Scenario, journal: Path) -> None:
        self.command = [sys.executable, "-m", "tests.kafka07.broker"]
        self.command += ["--port", str(scenario.port), "--journal", str(journal)]
        for topic, count in scenario.partitions.items():
            self.command += ["--partitions", f"{topic}={count}"]

    def __enter__(self) -> BrokerProcess:
        self._process = subprocess.Popen(self.command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise RuntimeError(f"broker did not start: {line!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


class DroppedPackets(RuntimeError):
    pass


def capture_scenario(scenario: Scenario, out_dir: Path) -> dict:
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return capture_once(scenario, out_dir)
        except DroppedPackets as error:
            print(f"{error}; attempt {attempt} of {ATTEMPTS}")
    raise RuntimeError(f"{scenario.name}: tcpdump kept dropping packets")


def capture_once(scenario: Scenario, out_dir: Path) -> dict:
    pcap = out_dir / f"{scenario.name}.pcap"
    journal_path = out_dir / f"{scenario.name}.broker.jsonl"
    options = CaptureOptions()
    tcpdump = Tcpdump(pcap, scenario.port, options)
    command, env, cwd = client_command(scenario, scenario.port)
    with BrokerProcess(scenario, journal_path), tcpdump:
        run = subprocess.run(
            command,
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLIENT_TIMEOUT_S,
            check=True,
        )
    stats = tcpdump.stats
    assert stats is not None
    if stats.dropped_by_kernel:
        raise DroppedPackets(f"{scenario.name}: tcpdump dropped {stats.dropped_by_kernel} packets")
    capture = {
        "file": pcap.name,
        "format": "pcap",
        "port": scenario.port,
        "interface": options.interface,
        "linktype": "default",
        "snaplen": 262144,
        "packets": stats.captured,
        "dropped_by_kernel": stats.dropped_by_kernel,
    }
    events = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    journal = read_jsonl(journal_path)
    truth = build_truth(
        scenario.name, scenario.description, scenario.client, journal, events, capture
    )
    write_json(out_dir / f"{scenario.name}.truth.json", truth)
    return truth


def write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def derive_all(out_dir: Path) -> None:
    """Cut the damaged variants out of one capture; their truth names what changed."""
    original_path = out_dir / f"{DERIVED_FROM}.pcap"
    original = read_pcap(original_path)
    base = json.loads((out_dir / f"{DERIVED_FROM}.truth.json").read_text())
    journal = read_jsonl(out_dir / f"{DERIVED_FROM}.broker.jsonl")
    streams = reassemble(original_path)
    for kind in DERIVED_KINDS:
        manifest = derive.DERIVATIONS[kind](original)
        manifest["damaged_frames"] = damaged_frames(manifest, streams, journal)
        name = f"kafka07_derived_{kind}"
        write_pcap(out_dir / f"{name}.pcap", derive.apply_order(original, manifest["order"]))
        truth = dict(base, scenario=name, derived_from=DERIVED_FROM, manifest=manifest)
        truth["capture"] = dict(base["capture"], file=f"{name}.pcap")
        truth["capture"]["packets"] = len(manifest["order"])
        write_json(out_dir / f"{name}.truth.json", truth)


def damaged_frames(
    manifest: dict, streams: dict[tuple[str, str], bytes], journal: list[dict]
) -> list[dict[str, object]]:
    """Requests and responses with bytes missing: in a lost segment, or before the cut."""
    ranges = [
        (m["client"], m["server"], m["direction"], m["offset"], m["length"])
        for m in manifest.get("missing", [])
    ]
    for key, first in manifest.get("first_captured_offset", {}).items():
        pair, direction = key.rsplit(":", 1)
        client, server = pair.split(">")
        ranges.append((client, server, direction, 0, first))
    return [row for r in ranges for row in frames_touched(streams, journal, *r)]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="scenarios to capture (default: all)")
    parser.add_argument("--out", type=Path, default=SAMPLES)
    parser.add_argument("--skip-install", action="store_true", help="clients already installed")
    args = parser.parse_args()
    chosen = [s for s in SCENARIOS if not args.names or s.name in args.names]
    if not args.skip_install:
        install_franz()
        if any(s.client == SAMSA for s in chosen):
            install_samsa()
    args.out.mkdir(parents=True, exist_ok=True)
    for scenario in chosen:
        truth = capture_scenario(scenario, args.out)
        print(f"{scenario.name}: {truth['capture']['packets']} packets, {truth['frames']}")
    if (args.out / f"{DERIVED_FROM}.pcap").exists():
        derive_all(args.out)
        print("derived captures rebuilt from", DERIVED_FROM)


if __name__ == "__main__":
    main()
