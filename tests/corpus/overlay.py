"""Real clients across real overlays and a real remote SPAN, captured on the underlay:
``python -m tests.corpus.overlay [NAME ...]`` (root; a few seconds per scenario).

Each scenario builds network namespaces of its own (names ``pwco-*``, removed after):
two underlay hosts joined by a veth pair (or through a router), and per tenant a client
and a broker namespace whose traffic crosses the underlay encapsulated. VXLAN uses
Linux's own device (``ip link add ... type vxlan``, created on an underlay host and moved
into the tenant's namespace); Geneve and GRE (over IPv4 and IPv6), which this kernel has
no device for, use Open vSwitch's userspace switch on each underlay host
(``tests/corpus/ovs.py``), a bridge per tenant joining the tenant's veth to its tunnel
port. The ERSPAN scenarios are a remote SPAN instead: client and broker share one switch
whose mirror sends a copy of every frame in ERSPAN to a collector host. Every tenant uses
the same inner addresses (10.200.0.1 to 10.200.0.2:6650); only the tunnel id (VNI, GRE
key) tells them apart. The test broker (``tests/broker``) runs in each broker namespace,
the official Python client (``pulsar-client``) in each client namespace, concurrently,
and tcpdump on the underlay writes ``sample_pcaps/overlay_NAME.pcap``. Beside it:
``overlay_NAME.truth.json`` (the scenario, and per tenant its tunnel id, the
``encapsulation`` its connections are carried in, client record and the frame counts its
broker's journal gives) and ``overlay_NAME.vniN.broker.jsonl`` (each broker's journal).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.corpus import ovs
from tests.corpus.tcpdump import CaptureError, parse_stats
from tests.corpus.truth import build_truth, read_journal

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "sample_pcaps"
PREFIX = "pwco-"
CLIENT_IP, BROKER_IP = "10.200.0.1", "10.200.0.2"
PORT = 6650


@dataclass(frozen=True)
class Overlay:
    """One capture: its tenants' tunnel ids, the tunnel, the underlay, where tcpdump
    listens and how."""

    name: str
    description: str
    vnis: tuple[int, ...]  # the tunnel id of each tenant: VNI, GRE key, ERSPAN session
    tunnel: str = "vxlan"  # vxlan (Linux's device), or an Open vSwitch port type
    options: tuple[tuple[str, object], ...] = ()  # the Open vSwitch port's other options
    geneve_option: int | None = None  # a Geneve option's value on the client's packets
    underlay_vlan: int | None = None  # the 802.1Q tag of the underlay (Open vSwitch's hosts)
    vxlan_port: int | None = 4789  # None: the kernel's default (8472)
    ipv6: bool = False  # the underlay's addresses
    underlay_mtu: int = 1500
    routed: bool = False  # the underlay hosts talk through a router, where tcpdump runs
    snaplen: int = 0
    message_size: int = 200
    messages: int = 10

    @property
    def mirror(self) -> bool:
        """ERSPAN mirrors one switch's traffic rather than carrying a tenant's."""
        return self.tunnel == "erspan"

    def encapsulation(self, vni: int) -> str:
        """The label pwcap's connections of tenant ``vni`` must carry (its tunnel's kind
        and id, as configured here)."""
        kind = {"ip6gre": "gre"}.get(self.tunnel, self.tunnel)
        vlan = "" if self.underlay_vlan is None else f"vlan:{self.underlay_vlan}/"
        return f"{vlan}{kind}:{vni}"


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
    Overlay(
        "overlay_geneve_two_tenants",
        "two tenants, the same inner addresses and ports, Geneve VNIs 1001 and 1002 over one"
        " underlay (Open vSwitch's userspace tunnels, UDP 6081); the client's packets carry"
        " a 4-byte Geneve option",
        (1001, 1002),
        tunnel="geneve",
        geneve_option=0xCAFE,
    ),
    Overlay(
        "overlay_gre_key",
        "one tenant's Ethernet over GRE with key 5 over IPv4 (Open vSwitch's gre port)",
        (5,),
        tunnel="gre",
    ),
    Overlay(
        "overlay_gre_vlan",
        "one tenant's Ethernet over GRE with key 7 over an underlay tagged 802.1Q VLAN 100"
        " (Open vSwitch's gre port; its underlay bridge's own port an access port of VLAN"
        " 100, the veth a trunk)",
        (7,),
        tunnel="gre",
        underlay_vlan=100,
    ),
    Overlay(
        "overlay_ip6gre",
        "one tenant's Ethernet over GRE with key 6 over an IPv6 underlay (Open vSwitch's"
        " ip6gre port)",
        (6,),
        tunnel="ip6gre",
        ipv6=True,
    ),
    Overlay(
        "overlay_erspan2_mirror",
        "a remote SPAN: client and broker on one switch whose mirror sends every frame to a"
        " collector in ERSPAN type II, session 12 (Open vSwitch's erspan port, version 1)",
        (12,),
        tunnel="erspan",
        options=(("erspan_ver", 1), ("erspan_idx", 7)),
    ),
    Overlay(
        "overlay_erspan3_mirror",
        "a remote SPAN in ERSPAN type III, session 13 (Open vSwitch's erspan port, version 2)",
        (13,),
        tunnel="erspan",
        options=(("erspan_ver", 2), ("erspan_dir", 1), ("erspan_hwid", 4)),
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


def build(overlay: Overlay, stack: ExitStack) -> Underlay:
    """The namespaces, links and tunnels of ``overlay`` (its switches run while ``stack``
    is open)."""
    remove_namespaces()
    a, b = f"{PREFIX}ua", f"{PREFIX}ub"
    for namespace in (a, b):
        sh("ip", "netns", "add", namespace)
        sh("ip", "-n", namespace, "link", "set", "lo", "up")
    underlay = routed_underlay(a, b) if overlay.routed else direct_underlay(overlay, a, b)
    if overlay.tunnel == "vxlan":
        linux_vxlan(overlay, a, b, underlay.hosts)
    elif overlay.mirror:
        ovs_mirror(overlay, stack.enter_context(ovs.switch(a)), underlay.hosts)
    else:
        switches = [stack.enter_context(ovs.switch(host)) for host in (a, b)]
        ovs_overlay(overlay, switches, underlay.hosts)
    time.sleep(0.5)
    return underlay


def routed_underlay(a: str, b: str) -> Underlay:
    """Underlay hosts ``a`` and ``b`` on two networks joined by a router, where tcpdump
    listens on both ports."""
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
    return Underlay(r, "any", (f"{nets[0]}.1", f"{nets[1]}.1"), "LINUX_SLL2")


def direct_underlay(overlay: Overlay, a: str, b: str) -> Underlay:
    """Underlay hosts ``a`` and ``b`` on one veth pair; tcpdump listens on ``a``'s end.
    A host whose switch encapsulates has its address on the switch's bridge ``phy``
    (Open vSwitch sends its tunnels out of the bridge its route names), the veth end a
    port of that bridge."""
    hosts = ("2001:db8:18::1", "2001:db8:18::2") if overlay.ipv6 else ("198.18.0.1", "198.18.0.2")
    sh("ip", "link", "add", "ua0", "netns", a, "type", "veth", "peer", "ub0", "netns", b)
    switched = {a, b} if overlay.tunnel != "vxlan" and not overlay.mirror else {a}
    for host, port, address in ((a, "ua0", hosts[0]), (b, "ub0", hosts[1])):
        sh("ip", "-n", host, "link", "set", port, "mtu", str(overlay.underlay_mtu), "up")
        if overlay.tunnel == "vxlan" or host not in switched:
            add_address(host, port, address, overlay.ipv6)
    return Underlay(a, "ua0", hosts, None)


def add_address(namespace: str, device: str, address: str, ipv6: bool) -> None:
    family, plen, dad = ("-6", 64, ["nodad"]) if ipv6 else ("-4", 24, [])  # nodad: usable at once
    sh("ip", "-n", namespace, family, "addr", "add", f"{address}/{plen}", "dev", device, *dad)


def tenant_namespace(vni: int, role: str) -> str:
    """Tenant ``vni``'s client (``c``) or broker (``b``) namespace."""
    tenant = f"{PREFIX}{vni}{role}"
    sh("ip", "netns", "add", tenant)
    sh("ip", "-n", tenant, "link", "set", "lo", "up")
    # No path MTU discovery inside: the underlay, not the client, splits packets.
    sh(*in_ns(tenant, "sysctl", "-q", "-w", "net.ipv4.ip_no_pmtu_disc=1"))
    # One client port: every tenant's connection has the very same endpoints.
    sh(*in_ns(tenant, "sysctl", "-q", "-w", "net.ipv4.ip_local_port_range=40000 40000"))
    return tenant


def linux_vxlan(overlay: Overlay, a: str, b: str, hosts: tuple[str, str]) -> None:
    """Per tenant a Linux VXLAN device on each underlay host, moved into the tenant's
    client or broker namespace."""
    for vni in overlay.vnis:
        for host, local, remote, inner, role in (
            (a, hosts[0], hosts[1], CLIENT_IP, "c"),
            (b, hosts[1], hosts[0], BROKER_IP, "b"),
        ):
            tenant = tenant_namespace(vni, role)
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


def tenant_link(host: str, vni: int, role: str, inner: str) -> str:
    """A veth from ``host`` into tenant ``vni``'s ``role`` namespace, which gets address
    ``inner``; returns the host's end. The tenant's MTU leaves room for the tunnel's
    headers: Open vSwitch's userspace tunnels do not fragment."""
    tenant, port = tenant_namespace(vni, role), f"{role}{vni}"
    sh("ip", "link", "add", port, "netns", host, "type", "veth", "peer", "eth0", "netns", tenant)
    sh("ip", "-n", host, "link", "set", port, "up")
    sh("ip", "-n", tenant, "addr", "add", f"{inner}/24", "dev", "eth0")
    sh("ip", "-n", tenant, "link", "set", "eth0", "mtu", "1400", "up")
    # A veth leaves checksums to "the hardware"; the switch reads frames as sent, so the
    # tenant computes them itself (ethtool, Debian's package).
    off = in_ns(tenant, "ethtool", "-K", "eth0", "tx", "off")
    subprocess.run(off, check=True, stdout=subprocess.DEVNULL)
    return port


def underlay_bridge(
    switch: ovs.Switch, port: str, address: str, ipv6: bool, vlan: int | None = None
) -> None:
    """The switch's bridge ``phy`` on the underlay veth end ``port``, with the host's
    underlay address; with ``vlan``, the host's frames cross the veth tagged."""
    switch.bridge("phy", port)
    if vlan is not None:
        switch.vsctl("set", "port", "phy", f"tag={vlan}")
    add_address(switch.namespace, "phy", address, ipv6)
    sh("ip", "-n", switch.namespace, "link", "set", "phy", "up")


def ovs_overlay(overlay: Overlay, switches: list[ovs.Switch], hosts: tuple[str, str]) -> None:
    """Per tenant, on each underlay host's switch, a bridge joining the tenant's veth to a
    tunnel port of ``overlay.tunnel`` with the tenant's id to the other host."""
    ends = (
        ("ua0", hosts[0], hosts[1], CLIENT_IP, "c"),
        ("ub0", hosts[1], hosts[0], BROKER_IP, "b"),
    )
    for switch, (port, local, remote, inner, role) in zip(switches, ends, strict=True):
        underlay_bridge(switch, port, local, overlay.ipv6, overlay.underlay_vlan)
        for vni in overlay.vnis:
            switch.bridge(f"t{vni}", tenant_link(switch.namespace, vni, role, inner))
            options = {"remote_ip": remote, "key": vni, **dict(overlay.options)}
            switch.tunnel(f"t{vni}", f"tun{vni}", overlay.tunnel, options)
            if overlay.geneve_option is not None and role == "c":
                switch.geneve_option(f"t{vni}", f"c{vni}", overlay.geneve_option)


def ovs_mirror(overlay: Overlay, switch: ovs.Switch, hosts: tuple[str, str]) -> None:
    """Client and broker on one bridge of underlay host ``a``'s switch, whose mirror
    sends a copy of every frame in ERSPAN to the collector, host ``b``."""
    (session,) = overlay.vnis
    underlay_bridge(switch, "ua0", hosts[0], overlay.ipv6)
    ports = [
        tenant_link(switch.namespace, session, role, inner)
        for role, inner in (("c", CLIENT_IP), ("b", BROKER_IP))
    ]
    switch.bridge("span", *ports)
    options = {"remote_ip": hosts[1], "key": session, **dict(overlay.options)}
    switch.tunnel("span", "erspan", "erspan", options)
    switch.mirror("span", "erspan")


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
json.dump({"sent": record.sent, "received": record.received, "failed": record.failed},
          sys.stdout)
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
        self.sent, self.received, self.failed = found["sent"], found["received"], found["failed"]


def capture(overlay: Overlay, out: Path) -> dict:
    pcap = out / f"{overlay.name}.pcap"
    journals = {vni: out / f"{overlay.name}.vni{vni}.broker.jsonl" for vni in overlay.vnis}
    try:
        with ExitStack() as stack:
            underlay = build(overlay, stack)
            urls = {vni: stack.enter_context(broker(vni, journals[vni])) for vni in overlay.vnis}
            seen = stack.enter_context(tcpdump(underlay, pcap, overlay.snaplen))
            records = run_clients(overlay, urls)
    finally:
        remove_namespaces()
    if seen["dropped_by_kernel"]:
        raise RuntimeError(f"{overlay.name}: tcpdump dropped {seen['dropped_by_kernel']} packets")
    tenants = []
    for vni in overlay.vnis:
        label = overlay.encapsulation(vni)
        description = f"{overlay.description}: tenant {label}"
        truth = build_truth(
            overlay.name, description, read_journal(journals[vni]), _Record(records[vni]), {}
        )
        tenants.append({"vni": vni, "encapsulation": label, "journal": journals[vni].name, **truth})
    tunnel: dict[str, object] = {"tunnel": overlay.tunnel, **dict(overlay.options)}
    if overlay.tunnel == "vxlan":
        tunnel["vxlan_port"] = overlay.vxlan_port or 8472
    else:
        tunnel["encapsulated_by"] = ovs.version()
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
            **tunnel,
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
