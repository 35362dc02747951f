"""Regenerate every sample capture: ``python -m tests.corpus.regenerate [NAME ...]`` (root).

Each scenario is written into its own folder (the hostile-names one into ``tests/hostile/``).

For each scenario: start the test broker on loopback, start tcpdump on the scenario's
port, run the official client, stop tcpdump, check it dropped nothing, and write
``NAME.pcap``, ``NAME.truth.json`` and ``NAME.broker.jsonl``. A scenario with a lossy
or a slow link runs again inside network namespaces built for it (``capture_with_loss``,
``capture_with_delay``). Then the derived captures are rebuilt from ``pulsar_plain``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fuzz.pcapfile import read_pcap, write_pcap, write_pcapng
from tests.corpus import derive
from tests.corpus.scenarios import BENCH_SCENARIOS, HOSTILE, SCENARIOS, Scenario
from tests.corpus.slowlink import DelayedLink, namespaces
from tests.corpus.tcpdump import Tcpdump
from tests.corpus.truth import build_truth, read_journal

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_pcaps"
DERIVED_FROM = "pulsar_plain"
HOSTS = Path("/etc/hosts")


@contextmanager
def hosts_entry(hostname: str | None, address: str) -> Iterator[None]:
    """Map ``hostname`` to ``address`` in /etc/hosts for the duration, then restore it.

    The C++ client accepts no IPv6 literal in a service URL, so an IPv6 scenario needs
    a name that resolves to ::1.
    """
    if hostname is None:
        yield
        return
    original = HOSTS.read_text()
    HOSTS.write_text(original + f"\n{address} {hostname}\n")
    try:
        yield
    finally:
        HOSTS.write_text(original)


class BrokerProcess:
    """The test broker in a child process, stopped when the scenario is done."""

    def __init__(self, scenario: Scenario, journal: Path) -> None:
        command = [sys.executable, "-m", "tests.broker", "--host", scenario.host]
        if scenario.delay_ms:  # across the slow link from the client (capture_with_delay)
            command = ["ip", "netns", "exec", namespaces(scenario.name)[1], *command]
        command += ["--port", str(scenario.port), "--journal", str(journal)]
        options = scenario.broker
        if "max_message_size" in options:
            command += ["--max-message-size", str(options["max_message_size"])]
        for topic, count in dict(options.get("partitions", {})).items():
            command += ["--partitions", f"{topic}={count}"]
        if options.get("entry_metadata"):
            command.append("--entry-metadata")
        if options.get("ping_interval"):
            command += ["--ping-interval", str(options["ping_interval"])]
        if scenario.hostname:
            command += ["--advertised-host", scenario.hostname]
        command += list(options.get("arguments", ()))  # any other (TLS scenarios' --tls-*)
        known = {"max_message_size", "partitions", "entry_metadata", "ping_interval", "arguments"}
        trouble = {key: value for key, value in options.items() if key not in known}
        if trouble:  # the findings' scenarios: the rest of BrokerConfig, as JSON
            command += ["--config", json.dumps(trouble)]
        self.command = command
        self.service_url = ""

    def __enter__(self) -> BrokerProcess:
        self._process = subprocess.Popen(self.command, cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise RuntimeError(f"broker did not start: {line!r}")
        self.service_url = line.removeprefix("listening on ")
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.wait(timeout=10)


ATTEMPTS = 3


class DroppedPackets(RuntimeError):
    pass


def capture_scenario(scenario: Scenario, out_dir: Path) -> dict:
    """Capture a scenario, retrying when the kernel dropped packets (a busy machine)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return capture_once(scenario, out_dir)
        except DroppedPackets as error:
            print(f"{error}; attempt {attempt} of {ATTEMPTS}")
    raise RuntimeError(f"{scenario.name}: tcpdump kept dropping packets")


def capture_once(scenario: Scenario, out_dir: Path) -> dict:
    """Run one scenario under tcpdump; return its truth (also written to ``out_dir``)."""
    pcap = out_dir / f"{scenario.name}.pcap"
    journal_path = out_dir / f"{scenario.name}.broker.jsonl"
    broker = BrokerProcess(scenario, journal_path)
    tcpdump = Tcpdump(pcap, scenario.port, scenario.capture)
    with hosts_entry(scenario.hostname, scenario.host), broker, tcpdump:
        record = scenario.run(broker.service_url)
    stats = tcpdump.stats
    assert stats is not None
    if stats.dropped_by_kernel:
        raise DroppedPackets(f"{scenario.name}: tcpdump dropped {stats.dropped_by_kernel} packets")
    capture = {
        "file": pcap.name,
        "format": "pcap",
        "port": scenario.port,
        "interface": scenario.capture.interface,
        "linktype": scenario.capture.linktype or "default",
        "snaplen": scenario.capture.snaplen or 262144,
        "packets": stats.captured,
        "dropped_by_kernel": stats.dropped_by_kernel,
    }
    if scenario.kills_a_client:  # its connection ends with a reset, in the middle of a frame
        capture["client_killed"] = True
    truth = build_truth(
        scenario.name, scenario.description, read_journal(journal_path), record, capture
    )
    write_json(out_dir / f"{scenario.name}.truth.json", truth)
    return truth


def write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n")


def derive_all(out_dir: Path) -> None:
    """Rewrite the plain capture into its damaged and re-encoded variants."""
    original = read_pcap(out_dir / f"{DERIVED_FROM}.pcap")
    base_truth = json.loads((out_dir / f"{DERIVED_FROM}.truth.json").read_text())
    for kind, derivation in derive.DERIVATIONS.items():
        manifest = derivation(original)
        name = f"pulsar_derived_{kind}"
        write_pcap(out_dir / f"{name}.pcap", derive.apply_order(original, manifest["order"]))
        write_derived_truth(out_dir, name, base_truth, manifest, "pcap")
    name = "pulsar_derived_pcapng"
    write_pcapng(out_dir / f"{name}.pcapng", original)
    manifest = {"kind": "pcapng", "order": list(range(len(original.records)))}
    write_derived_truth(out_dir, name, base_truth, manifest, "pcapng")


def write_derived_truth(
    out_dir: Path,
    name: str,
    base: dict,
    manifest: dict,
    file_format: str,
    derived_from: str = DERIVED_FROM,
) -> None:
    truth = dict(base, scenario=name, derived_from=derived_from, manifest=manifest)
    truth["capture"] = dict(base["capture"], file=f"{name}.{file_format}", format=file_format)
    truth["capture"]["packets"] = len(manifest["order"])
    write_json(out_dir / f"{name}.truth.json", truth)


def capture_with_loss(scenario: Scenario, out_dir: Path) -> dict:
    """Run the scenario again inside a network namespace of its own whose loopback drops
    ``loss_percent`` of the packets to the broker's port at input, after tcpdump saw them
    leave: the capture shows each dropped packet and its retransmission. Only segments
    carrying data are dropped (an IPv4 packet longer than its headers with timestamps),
    and the truth gets how many were (``loss``)."""
    namespace = f"pwcap-loss-{scenario.name}"[:30]
    rule = (
        f"tcp dport {scenario.port} ip length > 52"
        f" numgen random mod 100 < {scenario.loss_percent} counter drop"
    )
    setup = [
        ["ip", "netns", "add", namespace],
        ["ip", "netns", "exec", namespace, "ip", "link", "set", "lo", "up"],
        ["ip", "netns", "exec", namespace, "nft", "add", "table", "inet", "loss"],
        ["ip", "netns", "exec", namespace, "nft", "add", "chain", "inet", "loss", "input",
         "{ type filter hook input priority 0; }"],
        ["ip", "netns", "exec", namespace, "nft", "add", "rule", "inet", "loss", "input",
         *rule.split()],
    ]  # fmt: skip
    try:
        for command in setup:
            subprocess.run(command, check=True)
        capture_inside(namespace, scenario, out_dir)
        listed = subprocess.run(
            ["ip", "netns", "exec", namespace, "nft", "list", "chain", "inet", "loss", "input"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    finally:
        subprocess.run(["ip", "netns", "del", namespace], check=False)
    dropped = int(listed.split("counter packets ")[1].split()[0])
    loss = {"percent": scenario.loss_percent, "dropped_data_segments": dropped}
    return add_to_truth(out_dir, scenario, "loss", loss)


def capture_with_delay(scenario: Scenario, out_dir: Path) -> dict:
    """Run the scenario again with the client in a network namespace and the broker in
    another, joined by a link that holds every packet ``delay_ms`` each way
    (``tests/corpus/slowlink.py``), tcpdump on the client's side of it. The truth gets the
    delay asked for and the one the link measured for each packet (``link``)."""
    with DelayedLink(scenario.name, scenario.delay_ms) as link:
        capture_inside(link.client_namespace, scenario, out_dir)
    return add_to_truth(out_dir, scenario, "link", {"delay_ms": scenario.delay_ms, **link.measured})


def capture_inside(namespace: str, scenario: Scenario, out_dir: Path) -> None:
    """This program capturing ``scenario`` alone, run in ``namespace``."""
    inner = [sys.executable, "-m", "tests.corpus.regenerate", scenario.name]
    inner += ["--out", str(out_dir), "--inside-namespace"]
    subprocess.run(["ip", "netns", "exec", namespace, *inner], check=True, cwd=REPO)


def add_to_truth(out_dir: Path, scenario: Scenario, key: str, value: object) -> dict:
    """The scenario's truth file with ``key`` set to what only the outer run knows."""
    path = out_dir / f"{scenario.name}.truth.json"
    truth = json.loads(path.read_text())
    truth[key] = value
    write_json(path, truth)
    return truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "names", nargs="*", help="scenarios to capture (default: all but the benchmark's)"
    )
    parser.add_argument(
        "--out", type=Path, help="folder to write in (default: each scenario's own folder)"
    )
    parser.add_argument("--inside-namespace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    named = [s for s in [*SCENARIOS, *HOSTILE, *BENCH_SCENARIOS] if s.name in args.names]
    chosen = named if args.names else [*SCENARIOS, *HOSTILE]
    for scenario in chosen:
        out = args.out or REPO / scenario.folder
        out.mkdir(parents=True, exist_ok=True)
        if scenario.loss_percent and not args.inside_namespace:
            truth = capture_with_loss(scenario, out)
        elif scenario.delay_ms and not args.inside_namespace:
            truth = capture_with_delay(scenario, out)
        else:
            truth = capture_scenario(scenario, out)
        packets, frames = truth["capture"]["packets"], truth["frames_total"]
        print(f"{scenario.name}: {packets} packets, {frames} frames")
    derived_in = args.out or SAMPLES
    if (derived_in / f"{DERIVED_FROM}.pcap").exists() and not args.inside_namespace:
        derive_all(derived_in)
        print("derived captures rebuilt from", DERIVED_FROM)


if __name__ == "__main__":
    main()
