"""A link with a fixed one-way delay: two TUN devices and this process between them.

This machine's kernel has no netem (``tc qdisc ... netem``), so the slow-network scenario
makes its delay in user space: every IP packet the client's device sends is written into
the broker's device ``delay`` later, and the other way round, in order. Run it in the
client's namespace (``ip netns exec``): it opens both devices there and moves the broker's
into the broker's namespace. It prints ``ready`` once both exist, and on SIGTERM, as JSON,
how long it actually held each packet each way (``tests/corpus/slowlink.py`` runs it).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field

TUNSETIFF = 0x400454CA  # linux/if_tun.h
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000  # no packet-information header: each read is one bare IP packet
MAX_PACKET = 65_535
IDLE_S = 0.2  # how often an idle link looks whether it was told to stop


def open_tun(name: str) -> int:
    """A new TUN device ``name`` in this process's namespace, as a non-blocking fd."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


@dataclass
class Way:
    """One direction of the link: packets read from ``source`` and held for ``sink``."""

    source: int
    sink: int
    held: deque[tuple[int, bytes]] = field(default_factory=deque)  # (read at, ns; packet)
    delays_us: list[int] = field(default_factory=list)  # each packet's, as it left

    def take(self, now_ns: int) -> None:
        """Hold every packet waiting on ``source``."""
        while True:
            try:
                self.held.append((now_ns, os.read(self.source, MAX_PACKET)))
            except BlockingIOError:
                return

    def release(self, delay_ns: int) -> None:
        """Write the packets held ``delay_ns`` or longer, oldest first. A packet's delay
        ends as its write begins: the write runs the receiving side's stack, whose answer
        (a SYN-ACK, an ACK) may leave before it returns."""
        while self.held and (now := time.monotonic_ns()) - self.held[0][0] >= delay_ns:
            read_at, packet = self.held.popleft()
            self.delays_us.append((now - read_at) // 1000)
            os.write(self.sink, packet)


def forward(ways: tuple[Way, Way], delay_ns: int, stopping: list[bool]) -> None:
    """Move packets both ways, each after ``delay_ns``, until ``stopping`` is set."""
    while not stopping:
        due = [way.held[0][0] + delay_ns for way in ways if way.held]
        timeout = max(0.0, (min(due) - time.monotonic_ns()) / 1e9) if due else IDLE_S
        readable, _, _ = select.select([way.source for way in ways], [], [], timeout)
        now = time.monotonic_ns()
        for way in ways:
            if way.source in readable:
                way.take(now)
            way.release(delay_ns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=float, required=True, help="one way, each way")
    parser.add_argument("--client-device", required=True)
    parser.add_argument("--broker-device", required=True)
    parser.add_argument("--broker-namespace", required=True)
    args = parser.parse_args()
    client, broker = open_tun(args.client_device), open_tun(args.broker_device)
    move = ["ip", "link", "set", args.broker_device, "netns", args.broker_namespace]
    subprocess.run(move, check=True)
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    print("ready", flush=True)
    ways = (Way(client, broker), Way(broker, client))
    forward(ways, int(args.delay_ms * 1_000_000), stopping)
    measured = {"client_to_broker_us": ways[0].delays_us, "broker_to_client_us": ways[1].delays_us}
    print(json.dumps(measured), flush=True)


if __name__ == "__main__":
    main()
