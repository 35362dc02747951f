"""pwcap's decrypted byte streams equal tshark's (``-z follow,tls,raw``) on every TLS sample
that has its secrets: Wireshark's TLS dissector is the independent decryptor.

Skipped where tshark is not installed (``apt-get install tshark``; .ci/run installs it).
"""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

from pwcap.capture import Connection, Direction, read_streams
from pwcap.decode.tls.keylog import KeyLog
from pwcap.decode.tls.keys import Secrets
from pwcap.decode.tls.stream import TlsStream
from tests.conftest import SAMPLES
from tests.test_tls_samples import DECRYPTABLE, TRUTHS

pytestmark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed")


class DecryptedStreams:
    """A StreamSink that decrypts every connection with a TlsStream and keeps its
    plaintext per client endpoint and direction."""

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets
        self.streams: dict[tuple[str, str], bytearray] = defaultdict(bytearray)
        self._open: dict[int, TlsStream] = {}

    def on_open(self, conn: Connection) -> None:
        client = f"{conn.client_ip}:{conn.client_port}"

        def keep(direction: Direction, ts: int, offset: int, data: bytes) -> None:
            self.streams[(client, direction.label)] += data

        def lost(*args: object) -> None:
            raise AssertionError(f"{client}: a loss in a clean capture: {args}")

        self._open[conn.conn_id] = TlsStream(self.secrets, keep, lost, lost)

    def on_data(
        self, conn: Connection, direction: Direction, ts: int, offset: int, data: bytes
    ) -> None:
        self._open[conn.conn_id].on_data(direction, ts, offset, data)

    def on_gap(
        self, conn: Connection, direction: Direction, ts: int, offset: int, size: int
    ) -> None:
        self._open[conn.conn_id].on_gap(direction, ts, offset, size)

    def on_close(self, conn: Connection, ts: int, reason: str) -> None:
        self._open.pop(conn.conn_id).on_close(ts)


def pwcap_streams(capture: Path) -> dict[tuple[str, str], bytes]:
    keylog = SAMPLES / f"{capture.stem}.keylog"
    secrets = Secrets(KeyLog.from_files([str(keylog)]) if keylog.exists() else None)
    sink = DecryptedStreams(secrets)
    read_streams(capture, sink, secrets=secrets.add_block)
    return {key: bytes(data) for key, data in sink.streams.items() if data}


def tshark(capture: Path, port: int, *args: str) -> str:
    """tshark on a capture, its port given to TLS (tshark decides by port: it reads
    6653 as OpenFlow)."""
    keylog = SAMPLES / f"{capture.stem}.keylog"
    options = ["-d", f"tcp.port=={port},tls"]
    options += ["-o", f"tls.keylog_file:{keylog}"] if keylog.exists() else []
    done = subprocess.run(
        ["tshark", "-r", str(capture), *options, *args], capture_output=True, text=True, check=True
    )
    return done.stdout


def tshark_streams(capture: Path, server_port: int) -> dict[tuple[str, str], bytes]:
    """Each TCP stream's decrypted bytes as ``-z follow,tls,raw`` prints them: the lines of
    its first node flush left, the other node's indented by a tab."""
    clients = {}
    for line in tshark(
        capture,
        server_port,
        "-Y",
        "tcp.flags.syn == 1 && tcp.flags.ack == 0",
        "-T",
        "fields",
        "-e",
        "tcp.stream",
        "-e",
        "ip.src",
        "-e",
        "tcp.srcport",
    ).splitlines():
        index, address, port = line.split("\t")
        clients[int(index)] = f"{address}:{port}"
    streams: dict[tuple[str, str], bytes] = {}
    for index, client in clients.items():
        shown = tshark(capture, server_port, "-q", "-z", f"follow,tls,raw,{index}")
        first_node = next(line for line in shown.splitlines() if line.startswith("Node 0:"))
        first_is_server = first_node.endswith(f":{server_port}")
        parts = {"c2b": bytearray(), "b2c": bytearray()}
        for line in shown.splitlines():
            text = line.strip()
            if not text or any(c not in "0123456789abcdef" for c in text):
                continue  # the banner lines
            indented = line.startswith("\t")
            sender = "c2b" if indented == first_is_server else "b2c"
            parts[sender] += bytes.fromhex(text)
        for direction, data in parts.items():
            if data:
                streams[(client, direction)] = bytes(data)
    return streams


@pytest.mark.parametrize("name", DECRYPTABLE)
def test_decrypted_streams_equal_tsharks(name):
    capture = SAMPLES / name
    ours = pwcap_streams(capture)
    assert ours  # every sample carries data both ways
    assert ours == tshark_streams(capture, TRUTHS[name]["capture"]["port"])
