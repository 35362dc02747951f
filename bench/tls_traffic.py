"""A capture's TCP connections re-sent over TLS 1.3: the same traffic, encrypted.

:func:`encrypt_capture` rewrites a plaintext capture (Ethernet, IPv4 or IPv6, TCP) so that
every connection that carries data speaks TLS 1.3 with TLS_AES_128_GCM_SHA256: a
ClientHello, a ServerHello and each side's encrypted Finished go in three packets of their
own just before the connection's first data, and every data segment's payload becomes
the TLS records (16 KiB of plaintext at most each) that carry it, encrypted with pyca
``cryptography``. Timestamps, segmentation and the order of packets stay; sequence and
acknowledgement numbers follow the longer streams. Each connection's secrets are random
(from a seed) and written to an NSS key log.

Plaintext offsets and times are the original ones, so the decode of the encrypted
capture with its key log must give the tables of the plaintext one (the TLS columns and
the byte counts of the wire apart). This is a benchmark and test generator, not a TLS
stack: the correctness tests decrypt captures of real TLS stacks.
"""

from __future__ import annotations

import bisect
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

import dpkt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

RECORD_PLAINTEXT = 1 << 14
SERVER_NAME = b"broker.bench"
PCAP_HEADER = struct.Struct("<IHHiIII")
RECORD = struct.Struct("<IIII")


def _expand_label(secret: bytes, label: bytes, length: int) -> bytes:
    """HKDF-Expand-Label (RFC 8446 7.1) with SHA-256 and an empty context."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    return HKDFExpand(hashes.SHA256(), length, info).derive(secret)


class _Sender:
    """One direction's record protection: AES-128-GCM keys from a traffic secret."""

    def __init__(self, secret: bytes) -> None:
        self._aead = AESGCM(_expand_label(secret, b"key", 16))
        self._iv = int.from_bytes(_expand_label(secret, b"iv", 12), "big")
        self._seq = 0

    def seal(self, content_type: int, data: bytes) -> bytes:
        header = bytes([23, 3, 3]) + (len(data) + 17).to_bytes(2, "big")
        nonce = (self._iv ^ self._seq).to_bytes(12, "big")
        self._seq += 1
        return header + self._aead.encrypt(nonce, data + bytes([content_type]), header)

    def records(self, data: bytes) -> bytes:
        return b"".join(
            self.seal(23, data[at : at + RECORD_PLAINTEXT])
            for at in range(0, len(data), RECORD_PLAINTEXT)
        )


def _handshake_record(message_type: int, body: bytes) -> bytes:
    message = bytes([message_type]) + len(body).to_bytes(3, "big") + body
    return bytes([22, 3, 1]) + len(message).to_bytes(2, "big") + message


def _extension(kind: int, data: bytes) -> bytes:
    return kind.to_bytes(2, "big") + len(data).to_bytes(2, "big") + data


def client_hello(random_bytes: bytes) -> bytes:
    name = b"\x00" + len(SERVER_NAME).to_bytes(2, "big") + SERVER_NAME
    extensions = _extension(0, len(name).to_bytes(2, "big") + name)
    extensions += _extension(43, b"\x02\x03\x04")  # supported_versions: TLS 1.3
    extensions += _extension(51, b"\x00\x24\x00\x1d\x00\x20" + bytes(32))  # a key share
    body = b"\x03\x03" + random_bytes + b"\x00" + b"\x00\x02\x13\x01" + b"\x01\x00"
    body += len(extensions).to_bytes(2, "big") + extensions
    return _handshake_record(1, body)


def server_hello(random_bytes: bytes) -> bytes:
    extensions = _extension(43, b"\x03\x04") + _extension(51, b"\x00\x1d\x00\x20" + bytes(32))
    body = b"\x03\x03" + random_bytes + b"\x00" + b"\x13\x01" + b"\x00"
    return _handshake_record(2, body + len(extensions).to_bytes(2, "big") + extensions)


def _message(message_type: int, body: bytes) -> bytes:
    return bytes([message_type]) + len(body).to_bytes(3, "big") + body


@dataclass
class _Direction:
    """One direction of a connection: its sequence numbers old and new, its records."""

    isn: int | None = None
    extra: int = 0  # handshake bytes in front of the application records
    plain: list[int] = field(default_factory=list)  # segment starts (plaintext offsets)
    cipher: list[int] = field(default_factory=list)  # where each starts once encrypted
    sent: dict[int, bytes] = field(default_factory=dict)  # plaintext offset -> its records
    end: tuple[int, int] = (0, 0)  # plaintext and encrypted offset after the last segment
    sender: _Sender | None = None

    def offset(self, seq: int) -> int:
        assert self.isn is not None
        return (seq - self.isn - 1) % (1 << 32)

    def new_seq(self, plain_offset: int) -> int:
        return (self.isn + 1 + self.extra + self._cipher_at(plain_offset)) % (1 << 32)

    def _cipher_at(self, plain_offset: int) -> int:
        """The encrypted offset of a segment boundary (the one at or before a byte
        acknowledged inside a segment)."""
        if plain_offset >= self.end[0]:
            return self.end[1] + (plain_offset - self.end[0])
        at = bisect.bisect_right(self.plain, plain_offset) - 1
        return self.cipher[at] if at >= 0 else plain_offset


@dataclass
class _Connection:
    client: tuple[bytes, int]
    sides: tuple[_Direction, _Direction]  # the client's, the server's
    started: bool = False  # the handshake packets went out


def encrypt_capture(source: Path, target: Path, keylog: Path, seed: int = 34) -> int:
    """Write ``target``: ``source``'s connections over TLS 1.3, their secrets in
    ``keylog``; returns how many connections were encrypted."""
    rng = random.Random(seed)
    connections: dict[tuple, _Connection] = {}
    lines = []
    with source.open("rb") as handle, target.open("wb") as out:
        reader = dpkt.pcap.Reader(handle)
        out.write(PCAP_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, 262144, reader.datalink()))
        for ts, raw in reader:
            frame = dpkt.ethernet.Ethernet(raw)
            ip = frame.data
            tcp = ip.data
            if not isinstance(tcp, dpkt.tcp.TCP):
                _write(out, ts, bytes(frame))
                continue
            ends = ((ip.src, tcp.sport), (ip.dst, tcp.dport))
            key = tuple(sorted(ends))
            conn = connections.get(key)
            if conn is None or (tcp.flags & dpkt.tcp.TH_SYN and not tcp.flags & dpkt.tcp.TH_ACK):
                conn = connections[key] = _Connection(ends[0], (_Direction(), _Direction()))
            side = 0 if ends[0] == conn.client else 1
            mine, theirs = conn.sides[side], conn.sides[1 - side]
            if tcp.flags & dpkt.tcp.TH_SYN:
                mine.isn = tcp.seq
                _write(out, ts, bytes(frame))
                continue
            if mine.isn is None or theirs.isn is None:
                _write(out, ts, bytes(frame))  # no handshake seen: left as it is
                continue
            if tcp.data and not conn.started:
                for packet in _handshake(conn, frame, side, rng, lines):
                    _write(out, ts, packet)
            offset = mine.offset(tcp.seq)
            if tcp.data:
                records = mine.sent.get(offset)
                if records is None:
                    assert mine.sender is not None
                    records = mine.sent[offset] = mine.sender.records(bytes(tcp.data))
                    mine.plain.append(offset)
                    mine.cipher.append(mine.end[1])
                    mine.end = (offset + len(tcp.data), mine.end[1] + len(records))
                tcp.data = records
            tcp.seq = mine.new_seq(offset) if conn.started else tcp.seq
            if tcp.flags & dpkt.tcp.TH_ACK and conn.started:
                tcp.ack = theirs.new_seq(theirs.offset(tcp.ack))
            _write(out, ts, _packed(frame))
    keylog.write_text("".join(lines))
    return sum(1 for conn in connections.values() if conn.started)


def _handshake(
    conn: _Connection,
    frame: dpkt.ethernet.Ethernet,
    side: int,
    rng: random.Random,
    lines: list[str],
) -> list[bytes]:
    """The ClientHello, the server's first flight and the client's Finished, as three
    packets of this connection (copies of ``frame`` with the right ends and numbers)."""
    conn.started = True
    client, server = conn.sides
    client_random, server_random = rng.randbytes(32), rng.randbytes(32)
    secrets = {
        label: rng.randbytes(32)
        for label in (
            "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            "CLIENT_TRAFFIC_SECRET_0",
            "SERVER_TRAFFIC_SECRET_0",
        )
    }
    lines += [
        f"{label} {client_random.hex()} {secret.hex()}\n" for label, secret in secrets.items()
    ]
    hello = client_hello(client_random)
    server_flight = server_hello(server_random) + _Sender(
        secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]
    ).seal(22, _message(8, b"\x00\x00") + _message(20, rng.randbytes(32)))
    finished = _Sender(secrets["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]).seal(
        22, _message(20, rng.randbytes(32))
    )
    client.sender = _Sender(secrets["CLIENT_TRAFFIC_SECRET_0"])
    server.sender = _Sender(secrets["SERVER_TRAFFIC_SECRET_0"])
    packets = []
    sent = [0, 0]
    for who, payload in ((0, hello), (1, server_flight), (0, finished)):
        copy = dpkt.ethernet.Ethernet(bytes(frame))
        ip, tcp = copy.data, copy.data.data
        if who != side:  # the other way round from the frame it copies
            copy.src, copy.dst = copy.dst, copy.src
            ip.src, ip.dst = ip.dst, ip.src
            tcp.sport, tcp.dport = tcp.dport, tcp.sport
        mine, theirs = conn.sides[who], conn.sides[1 - who]
        tcp.seq = (mine.isn + 1 + sent[who]) % (1 << 32)
        tcp.ack = (theirs.isn + 1 + sent[1 - who]) % (1 << 32)
        tcp.flags = dpkt.tcp.TH_ACK | dpkt.tcp.TH_PUSH
        tcp.data = payload
        sent[who] += len(payload)
        packets.append(_packed(copy))
    client.extra, server.extra = sent
    return packets


def _packed(frame: dpkt.ethernet.Ethernet) -> bytes:
    """The frame with its lengths and checksums computed again."""
    ip = frame.data
    ip.data.sum = 0  # dpkt computes the TCP checksum again when the packet is packed
    if isinstance(ip, dpkt.ip.IP):
        ip.len = len(ip)
        ip.sum = 0
    else:
        ip.plen = len(ip.data)
    return bytes(frame)


def _write(out: object, ts: float, packet: bytes) -> None:
    micros = round(ts * 1e6)
    seconds, fraction = divmod(micros, 1_000_000)
    out.write(RECORD.pack(seconds, fraction, len(packet), len(packet)))  # type: ignore[attr-defined]
    out.write(packet)  # type: ignore[attr-defined]
