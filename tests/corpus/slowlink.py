"""A slow network between the client and the broker: two network namespaces joined only
by ``tests/corpus/delayline.py``, which holds each packet a fixed time each way.

The client's namespace has ``CLIENT_DEVICE`` (``CLIENT_ADDRESS``), the broker's
``BROKER_DEVICE`` (``BROKER_ADDRESS``), both in one /30. tcpdump on ``CLIENT_DEVICE``
captures at the client: its own round trip is nearly nothing, the broker's is the delay.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLIENT_DEVICE = "pwcap-client"
BROKER_DEVICE = "pwcap-broker"
CLIENT_ADDRESS = "10.200.0.1"
BROKER_ADDRESS = "10.200.0.2"
PREFIX = 30


def namespaces(scenario: str) -> tuple[str, str]:
    """The client's and the broker's namespace of a scenario (names ``ip netns`` keeps)."""
    return f"pwcap-slow-client-{scenario}", f"pwcap-slow-broker-{scenario}"


def _run(*command: str) -> None:
    subprocess.run(command, check=True)


class DelayedLink:
    """``with DelayedLink(scenario, delay_ms) as link:`` the namespaces and the link between
    them; after it, ``link.measured`` holds how long the link held each packet, each way
    (``client_to_broker_us``, ``broker_to_client_us``, in the order they crossed)."""

    def __init__(self, scenario: str, delay_ms: float) -> None:
        self.client_namespace, self.broker_namespace = namespaces(scenario)
        self.delay_ms = delay_ms
        self.measured: dict[str, list[int]] = {}

    def __enter__(self) -> DelayedLink:
        self._forwarder: subprocess.Popen[str] | None = None
        try:
            self._build()
        except BaseException:
            self._tear_down()
            raise
        return self

    def _build(self) -> None:
        for namespace in (self.client_namespace, self.broker_namespace):
            _run("ip", "netns", "add", namespace)
            # No IPv6 on the link: it carries the scenario's packets and nothing else.
            for scope in ("all", "default"):
                sysctl = f"net.ipv6.conf.{scope}.disable_ipv6=1"
                _run("ip", "netns", "exec", namespace, "sysctl", "-qw", sysctl)
        self._forwarder = subprocess.Popen(
            ["ip", "netns", "exec", self.client_namespace, sys.executable, "-m",
             "tests.corpus.delayline", "--delay-ms", str(self.delay_ms),
             "--client-device", CLIENT_DEVICE, "--broker-device", BROKER_DEVICE,
             "--broker-namespace", self.broker_namespace],
            cwd=REPO, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self._forwarder.stdout is not None
        if self._forwarder.stdout.readline().strip() != "ready":
            raise RuntimeError("the delay line did not start")
        for namespace, device, address in (
            (self.client_namespace, CLIENT_DEVICE, CLIENT_ADDRESS),
            (self.broker_namespace, BROKER_DEVICE, BROKER_ADDRESS),
        ):
            _run("ip", "-n", namespace, "addr", "add", f"{address}/{PREFIX}", "dev", device)
            _run("ip", "-n", namespace, "link", "set", device, "up")

    def __exit__(self, *exc: object) -> None:
        assert self._forwarder is not None
        self._forwarder.send_signal(signal.SIGTERM)
        try:
            out, _ = self._forwarder.communicate(timeout=30)
        finally:
            self._tear_down()
        if self._forwarder.returncode != 0:
            raise RuntimeError(f"the delay line failed ({self._forwarder.returncode})")
        self.measured = json.loads(out)

    def _tear_down(self) -> None:
        """Stop the delay line if it still runs, and remove both namespaces."""
        if self._forwarder is not None and self._forwarder.poll() is None:
            self._forwarder.kill()
            self._forwarder.wait()
        for namespace in (self.client_namespace, self.broker_namespace):
            subprocess.run(
                ["ip", "netns", "del", namespace], check=False, stderr=subprocess.DEVNULL
            )
