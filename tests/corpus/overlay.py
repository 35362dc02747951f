"""Real clients across Linux's own VXLAN overlay, captured on the underlay:
``python -m tests.corpus.overlay [NAME ...]`` (root; a few seconds per scenario).

Each scenario builds network namespaces of its own (names ``pwco-*``, removed after):
two underlay hosts joined by a veth pair (or through a router), and per tenant a client
and a broker namespace whose only link is a Linux VXLAN device (``ip link add ... type
vxlan``) created on an underlay host and moved into the tenant's namespace, so its
traffic crosses the underlay encapsulated. Every tenant uses the same inner addresses
(10.200.0.1 to 10.200.0.2:6650); only the VNI tells them apart. The test broker
(``tests/broker``) runs in each broker namespace, the official Python client
(``pulsar-client``) in each client namespace, concurrently, and tcpdump on the underlay
writes ``sample_pcaps/overlay_NAME.pcap``. Beside it: ``overlay_NAME.truth.json`` (the
scenario, and per tenant its VNI, client record and the frame counts its broker's
journal gives) and ``overlay_NAME.vniN.broker.jsonl`` (each broker's journal).

The machine's kernel has VXLAN but no GRE, Geneve or ERSPAN devices: those overlays are
covered by the wrapped captures of ``tests/tunnels.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.corpus.tcpdump import CaptureError, parse_stats
from tests.corpus.truth import build_truth, read_journal

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_pcaps"
PREFIX = "pwco-"
CLIENT_IP, BROKER_IP = "10.200.0.1", "10.200.0.2"
PORT = 6650


@dataclass(frozen=True)
class Overlay:
    """One capture: its tenants' VNIs, the underlay, where tcpdump listens and how."""

    name: str
    description: str
    vnis: tuple[int, ...]
    vxlan_port: int | None = 4789  # None: the kernel's default (8472)
    ipv6: bool = False  # the underlay's addresses
    underlay_mtu: int = 1500
    routed: bool = False  # the underlay hosts talk through a router, where tcpdump runs
    snaplen: int = 0
    message_size: int = 200
    messages: int = 10
    extra: dict[str, object] = field(default_factory=dict)


OVERLAYS = [
    Overlay(
        "overlay_vxlan_two_tenants",
        "two tenants, the same inner addresses and ports, VNIs 1001 and 1002 over one"
        " underlay (VXLAN port 4789)",
        (1001, 1002),
    ),
    Overlay(
        "overlay_vxlan_fragmented",
        "one tenant over an underlay whose MTU (576) is smaller than the overlay's (1500):"
        " the underlay fragments the outer packets (Linux's default VXLAN port, 8472)",
        (4242,),
        vxlan_port=None,
        underlay_mtu=576,
        message_size=1200,
    ),
    Overlay(
        "overlay_vxlan_ipv6_cut",
        "one tenant over an IPv6 underlay, captured with a snaplen of 160 bytes (a mirror"
        " that truncates)",
        (77,),
        ipv6=True,
        snaplen=160,
        message_size=400,
    ),
    Overlay(
        "overlay_vxlan_span_doubled",
        "one tenant over a routed underlay, captured on the router's two ports at once"
        " (tcpdump -i any): every packet twice, as a SPAN of both directions gives it",
        (9,),
        routed=True,
    ),
]


def sh(*command: str) -> None:
    subprocess.run(command, check=True)


def in_ns(namespace: str, *command: str) -> list[str]:
    return ["ip", "netns", "exec", namespace, *command]


def remove_namespaces() -> None:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    for line in listed.stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX):
            subprocess.run(["ip", "netns", "del", name], check=False)


@dataclass(frozen=True)
class Underlay:
    """Where tcpdump listens, and each underlay host's own address."""

    namespace: str
    interface: str
    hosts: tuple[str, str]
    linktype: str | None


def build(overlay: Overlay) -> Underlay:
    """The namespaces, links and VXLAN devices of ``overlay``."""
    remove_namespaces()
    a, b = f"{PREFIX}ua", f"{PREFIX}ub"
    family, plen = ("-6", 64) if overlay.ipv6 else ("-4", 24)
    for namespace in (a, b):
        sh("ip", "netns", "add", namespace)
        sh("ip", "-n", namespace, "link", "set", "lo", "up")
    if overlay.routed:
        r = f"{PREFIX}r"
        sh("ip", "netns", "add", r)
        nets = ("198.18.0", "198.18.1")
        sh("ip", "link", "add", "ua0", "netns", a, "type", "veth", "peer", "r0", "netns", r)
        sh("ip", "link", "add", "ub0", "netns", b, "type", "veth", "peer", "r1", "netns", r)
        for host, port, net in ((a, "ua0", nets[0]), (b, "ub0", nets[1])):
            sh("ip", "-n", host, "addr", "add", f"{net}.1/24", "dev", port)
            sh("ip", "-n", host, "link", "set", port, "up")
            sh("ip", "-n", host, "route", "add", "default", "via", f"{net}.254")
        for port, net in (("r0", nets[0]), ("r1", nets[1])):
            sh("ip", "-n", r, "addr", "add", f"{net}.254/24", "dev", port)
            sh("ip", "-n", r, "link", "set", port, "up")
        sh(*in_ns(r, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"))
        hosts = (f"{nets[0]}.1", f"{nets[1]}.1")
        underlay = Underlay(r, "any", hosts, "LINUX_SLL2")
    else:
        hosts = (
            ("2001:db8:18::1", "2001:db8:18::2") if overlay.ipv6 else ("198.18.0.1", "198.18.0.2")
        )
        sh("ip", "link", "add", "ua0", "netns", a, "type", "veth", "peer", "ub0", "netns", b)
        for host, port, address in ((a, "ua0", hosts[0]), (b, "ub0", hosts[1])):
            dad = ["nodad"] if overlay.ipv6 else []  # usable at once
            sh("ip", "-n", host, family, "addr", "add", f"{address}/{plen}", "dev", port, *dad)
            sh("ip", "-n", host, "link", "set", port, "mtu", str(overlay.underlay_mtu), "up")
        underlay = Underlay(a, "ua0", hosts, None)
    for vni in overlay.vnis:
        for host, local, remote, inner, role in (
            (a, hosts[0], hosts[1], CLIENT_IP, "c"),
            (b, hosts[1], hosts[0], BROKER_IP, "b"),
        ):
            tenant = f"{PREFIX}{vni}{role}"
            sh("ip", "netns", "add", tenant)
            sh("ip", "-n", tenant, "link", "set", "lo", "up")
            port = [] if overlay.vxlan_port is None else ["dstport", str(overlay.vxlan_port)]
            # No lower device: the kernel would cap the overlay's MTU at the underlay's
            # less the headers, and never have the underlay fragment.
            sh(
                "ip", "-n", host, "link", "add", f"vx{vni}", "type", "vxlan",
                "id", str(vni), "local", local, "remote", remote, *port,
            )  # fmt: skip
            sh("ip", "-n", host, "link", "set", f"vx{vni}", "netns", tenant)
            sh("ip", "-n", tenant, "addr", "add", f"{inner}/24", "dev", f"vx{vni}")
            sh("ip", "-n", tenant, "link", "set", f"vx{vni}", "mtu", "1500", "up")
            # No path MTU discovery inside: the underlay, not the client, splits packets.
            sh(*in_ns(tenant, "sysctl", "-q", "-w", "net.ipv4.ip_no_pmtu_disc=1"))
            # One client port: every tenant's connection has the very same endpoints.
            sh(*in_ns(tenant, "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40000"))
    time.sleep(0.5)
    return underlay


@contextmanager
def broker(vni: int, journal: Path) -> Iterator[str]:
    """The test broker in tenant ``vni``'s broker namespace; yields its service URL."""
    command = in_ns(
        f"{PREFIX}{vni}b", sys.executable, "-m", "tests.broker",
        "--host", BROKER_IP, "--port", str(PORT), "--journal", str(journal),
    )  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    try:
        yield line.removeprefix("listening on ")
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def tcpdump(underlay: Underlay, path: Path, snaplen: int) -> Iterator[dict]:
    """tcpdump on the underlay, everything it sees (ARP and neighbour discovery too)."""
    command = ["tcpdump", "-i", underlay.interface, "-w", str(path), "-U", "-n"]
    command += ["--immediate-mode", "-s", str(snaplen), "-B", "32768"]
    if underlay.linktype:
        command += ["-y", underlay.linktype]
    process = subprocess.Popen(
        in_ns(underlay.namespace, *command),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    lines: list[str] = []
    while not lines or "listening on" not in lines[-1]:
        line = process.stderr.readline()
        if not line:
            raise CaptureError(f"tcpdump did not start: {' '.join(lines)}")
        lines.append(line.strip())
    time.sleep(1.0)
    found: dict = {}
    try:
        yield found
    finally:
        time.sleep(1.0)
        process.send_signal(2)
        _, err = process.communicate(timeout=30)
        stats = parse_stats(err)
        found.update(packets=stats.captured, dropped_by_kernel=stats.dropped_by_kernel)


CLIENT = """
import json, sys, time
import pulsar
from tests.corpus.record import ClientRecord, quiet_logger
from tests.corpus.scenarios import payload, properties, receive_and_ack
url, vni, size, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
record = ClientRecord()
client = pulsar.Client(url, operation_timeout_seconds=15, logger=quiet_logger())
consumer = client.subscribe(f"tenant-{vni}", f"sub-{vni}",
                            initial_position=pulsar.InitialPosition.Earliest)
producer = client.create_producer(f"tenant-{vni}", producer_name=f"producer-{vni}",
                                  batching_enabled=False)
for i in range(count):
    record.send(producer, payload(i, size), i, key=f"key-{i % 3}",
                properties=properties(f"vni-{vni}", i))
receive_and_ack(record, consumer, count)
producer.close()
time.sleep(0.3)
consumer.close()
client.close()
json.dump({"sent": record.sent, "received": record.received}, sys.stdout)
"""


def run_clients(overlay: Overlay, urls: dict[int, str]) -> dict[int, dict]:
    """Every tenant's client at once, each in its own namespace; what each recorded."""
    processes = {
        vni: subprocess.Popen(
            in_ns(
                f"{PREFIX}{vni}c",
                sys.executable,
                "-c",
                CLIENT,
                urls[vni],
                str(vni),
                str(overlay.message_size),
                str(overlay.messages),
            ),
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        for vni in overlay.vnis
    }
    records = {}
    for vni, process in processes.items():
        out, _ = process.communicate(timeout=120)
        if process.returncode:
            raise RuntimeError(f"the client of VNI {vni} failed ({process.returncode})")
        records[vni] = json.loads(out)
    return records


class _Record:
    """What build_truth reads of a client's record."""

    def __init__(self, found: dict) -> None:
        self.sent, self.received = found["sent"], found["received"]


def capture(overlay: Overlay, out: Path) -> dict:
    pcap = out / f"{overlay.name}.pcap"
    journals = {vni: out / f"{overlay.name}.vni{vni}.broker.jsonl" for vni in overlay.vnis}
    try:
        underlay = build(overlay)
        with ExitStack() as stack:
            urls = {vni: stack.enter_context(broker(vni, journals[vni])) for vni in overlay.vnis}
            seen = stack.enter_context(tcpdump(underlay, pcap, overlay.snaplen))
            records = run_clients(overlay, urls)
    finally:
        remove_namespaces()
    if seen["dropped_by_kernel"]:
        raise RuntimeError(f"{overlay.name}: tcpdump dropped {seen['dropped_by_kernel']} packets")
    tenants = []
    for vni in overlay.vnis:
        description = f"{overlay.description}: tenant VNI {vni}"
        truth = build_truth(
            overlay.name, description, read_journal(journals[vni]), _Record(records[vni]), {}
        )
        tenants.append({"vni": vni, "journal": journals[vni].name, **truth})
    truth = {
        "scenario": overlay.name,
        "description": overlay.description,
        "capture": {
            "file": pcap.name,
            "format": "pcap",
            "interface": underlay.interface,
            "linktype": underlay.linktype or "EN10MB",
            "snaplen": overlay.snaplen or 262144,
            "underlay": list(underlay.hosts),
            "underlay_mtu": overlay.underlay_mtu,
            "vxlan_port": overlay.vxlan_port or 8472,
            "inner": [CLIENT_IP, f"{BROKER_IP}:{PORT}"],
            **seen,
        },
        "tenants": tenants,
    }
    (out / f"{overlay.name}.truth.json").write_text(
        json.dumps(truth, indent=1, sort_keys=True) + "\n"
    )
    return truth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="overlays to capture (default: all)")
    parser.add_argument("--out", type=Path, default=SAMPLES)
    args = parser.parse_args()
    for overlay in OVERLAYS:
        if not args.names or overlay.name in args.names:
            truth = capture(overlay, args.out)
            frames = sum(tenant["frames_total"] for tenant in truth["tenants"])
            print(f"{overlay.name}: {truth['capture']['packets']} packets, {frames} frames")


if __name__ == "__main__":
    main()
