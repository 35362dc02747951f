"""Open vSwitch's userspace switch in a network namespace, for the overlays this kernel has
no device for: Geneve, GRE (over IPv4 and IPv6) and ERSPAN.

This machine's kernel builds VXLAN devices but no Geneve, GRE or ERSPAN ones (nor the
Open vSwitch module); ``ovs-vswitchd`` with ``datapath_type=netdev`` encapsulates in
userspace, reading and writing plain veth devices, so its tunnels are real ones made by a
real switch. Each switch has its own database and run folder, so several run at once,
one per namespace; Debian's ``openvswitch-switch`` provides them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


def version() -> str:
    """``ovs-vswitchd (Open vSwitch) 3.1.0``: which switch made a capture."""
    found = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True, text=True)
    return found.stdout.splitlines()[0].strip()


class Switch:
    """One ``ovs-vswitchd`` and its ``ovsdb-server``, running in ``namespace``."""

    def __init__(self, namespace: str, folder: Path) -> None:
        self.namespace, self.folder = namespace, folder
        self.env = {**os.environ, "OVS_RUNDIR": str(folder), "OVS_LOGDIR": str(folder)}

    def _run(self, *command: str) -> str:
        found = subprocess.run(command, env=self.env, capture_output=True, text=True)
        if found.returncode:
            raise RuntimeError(f"{' '.join(command)}: {found.stderr.strip()}")
        return found.stdout

    def _in_namespace(self, *command: str) -> str:
        return self._run("ip", "netns", "exec", self.namespace, *command)

    def vsctl(self, *args: str) -> str:
        return self._run("ovs-vsctl", f"--db=unix:{self.folder}/db.sock", "--timeout=10", *args)

    def bridge(self, name: str, *ports: str) -> None:
        """A bridge of the userspace datapath, with ``ports`` (devices in the namespace)."""
        self.vsctl("add-br", name, "--", "set", "bridge", name, "datapath_type=netdev")
        for port in ports:
            self.vsctl("add-port", name, port)

    def tunnel(self, bridge: str, name: str, kind: str, options: dict[str, object]) -> None:
        """A tunnel port (``geneve``, ``gre``, ``ip6gre``, ``erspan``, ...) on ``bridge``."""
        settings = [f"options:{key}={value}" for key, value in options.items()]
        self.vsctl(
            "add-port", bridge, name, "--", "set", "interface", name, f"type={kind}", *settings
        )

    def geneve_option(self, bridge: str, port: str, value: int) -> None:
        """A Geneve option (class 0x0102, type 1, 4 bytes of ``value``) on every frame that
        enters ``bridge`` from ``port``; its other frames switch as usual."""
        ofctl = ("ovs-ofctl", "-O", "OpenFlow15")
        self._run(*ofctl, "add-tlv-map", bridge, "{class=0x0102,type=0x01,len=4}->tun_metadata0")
        self._run(
            *ofctl, "add-flow", bridge,
            f"priority=10,in_port={port},actions=set_field:{value:#x}->tun_metadata0,normal",
        )  # fmt: skip

    def mirror(self, bridge: str, port: str) -> None:
        """Everything ``bridge`` switches, copied out of ``port`` (and nothing else there)."""
        self.vsctl(
            "--", "--id=@p", "get", "port", port,
            "--", "--id=@m", "create", "mirror", "name=span", "select-all=true", "output-port=@p",
            "--", "set", "bridge", bridge, "mirrors=@m",
        )  # fmt: skip

    def start(self) -> None:
        database = self.folder / "conf.db"
        self._run("ovsdb-tool", "create", str(database), str(SCHEMA))
        self._in_namespace(
            "ovsdb-server", str(database), f"--remote=punix:{self.folder}/db.sock",
            "--pidfile", "--detach", "--log-file",
        )  # fmt: skip
        self.vsctl("--no-wait", "init")
        self._in_namespace(
            "ovs-vswitchd", f"unix:{self.folder}/db.sock", "--pidfile", "--detach", "--log-file"
        )

    def stop(self) -> None:
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pidfile = self.folder / f"{daemon}.pid"
            if pidfile.exists():
                subprocess.run(
                    ["ovs-appctl", "-t", daemon, "exit"], env=self.env, capture_output=True
                )


@contextmanager
def switch(namespace: str) -> Iterator[Switch]:
    """A switch running in ``namespace`` while the context lasts."""
    with tempfile.TemporaryDirectory(prefix="pwco-ovs-") as folder:
        running = Switch(namespace, Path(folder))
        try:
            running.start()
            yield running
        finally:
            running.stop()
