"""Every cipher suite a current Java, OpenSSL or Go peer negotiates by default decrypts.

Both peers are OpenSSL (Python's ``ssl`` over memory BIOs), the server writing its key
log; the bytes each peer sent, cut at arbitrary points as TCP segments would carry them
(records split across segments and several in one), go to a TlsStream with that key log,
and the decrypted streams must equal what each application wrote, the ``tls_*`` columns
what OpenSSL says it negotiated. The TLS samples (tests/test_tls_samples.py) cover
some of these suites end to end with a real client; this covers them all, with those
the samples lack: TLS 1.3 AES-128-GCM (Go's first choice), and ECDHE-ECDSA with AES-GCM
and ChaCha20-Poly1305 (the suites of an EC certificate).
"""

from __future__ import annotations

import contextlib
import random
import ssl
from pathlib import Path

import pytest

from pwcap.capture import Direction
from pwcap.decode.tls.keylog import KeyLog
from pwcap.decode.tls.keys import Secrets
from pwcap.decode.tls.stream import TlsStream
from tests.broker.openssl import set_ciphersuites
from tests.broker.tls import CA, SERVER_CHAINS, VERSIONS, write_certificates

# (version, OpenSSL's suite name, IANA's): the defaults of JSSE, OpenSSL 3 and Go's
# crypto/tls for TLS 1.3, and their ECDHE AEAD suites for TLS 1.2 with either key type.
SUITES = [
    ("1.3", "TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"),
    ("1.3", "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"),
    ("1.3", "TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256"),
    ("1.2", "ECDHE-ECDSA-AES128-GCM-SHA256", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    ("1.2", "ECDHE-ECDSA-AES256-GCM-SHA384", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    ("1.2", "ECDHE-ECDSA-CHACHA20-POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"),
    ("1.2", "ECDHE-RSA-AES128-GCM-SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
    ("1.2", "ECDHE-RSA-AES256-GCM-SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"),
    ("1.2", "ECDHE-RSA-CHACHA20-POLY1305", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"),
]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_certificates(tmp_path_factory.mktemp("certificates"))


def contexts(
    certificates: Path, keylog: Path, version: str, suite: str
) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server offering RSA and ECDSA certificates, logging its secrets, and a client;
    both held to ``version`` and ``suite``."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.load_verify_locations(certificates / CA)
    for chain, key in SERVER_CHAINS:
        server.load_cert_chain(certificates / chain, certificates / key)
    for context in (server, client):
        context.minimum_version = context.maximum_version = VERSIONS[version]
        if version == "1.3":
            set_ciphersuites(context, suite)
        else:
            context.set_ciphers(suite)
    server.keylog_filename = str(keylog)
    return server, client


class Wire:
    """The bytes the two peers send each other, kept in pieces of random sizes as a
    capture's TCP segments would carry them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sent = {Direction.C2B: 0, Direction.B2C: 0}
        self.segments: list[tuple[Direction, int, bytes]] = []  # direction, offset, bytes

    def carry(self, direction: Direction, source: ssl.MemoryBIO, sink: ssl.MemoryBIO) -> bool:
        data = source.read()
        sink.write(data)
        pos = 0
        while pos < len(data):
            piece = data[pos : pos + self.rng.choice([1, 5, 7, 300, 1448, 20000])]
            self.segments.append((direction, self.sent[direction], piece))
            self.sent[direction] += len(piece)
            pos += len(piece)
        return bool(data)


def exchange(
    server_context: ssl.SSLContext, client_context: ssl.SSLContext
) -> tuple[Wire, dict[Direction, bytes], ssl.SSLObject]:
    """A handshake, then application data both ways (small writes, and writes of several
    records); returns the wire, what each side wrote, and the server's end."""
    rng = random.Random(7)
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    from_server, from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_context.wrap_bio(from_client, to_client, server_side=True)
    client = client_context.wrap_bio(from_server, to_server, server_hostname="localhost")
    wire = Wire(rng)

    def pump() -> None:
        while wire.carry(Direction.C2B, to_server, from_client) | wire.carry(
            Direction.B2C, to_client, from_server
        ):
            for end in (server, client):
                try:
                    end.do_handshake()
                    while end.read(1 << 20):
                        pass
                except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                    pass

    with contextlib.suppress(ssl.SSLWantReadError):
        client.do_handshake()  # the ClientHello
    pump()
    written: dict[Direction, bytes] = {Direction.C2B: b"", Direction.B2C: b""}
    for size in (1, 100, 5000, 40000, 17, 70000):
        for direction, end in ((Direction.C2B, client), (Direction.B2C, server)):
            data = rng.randbytes(size)
            end.write(data)
            written[direction] += data
        pump()
    return wire, written, server


@pytest.mark.parametrize(("version", "suite", "iana"), SUITES, ids=[s[1] for s in SUITES])
def test_each_default_suite_decrypts_to_what_the_peers_wrote(
    tmp_path, certificates, version, suite, iana
):
    keylog = tmp_path / "keys.log"
    server_context, client_context = contexts(certificates, keylog, version, suite)
    received: dict[Direction, bytearray] = {Direction.C2B: bytearray(), Direction.B2C: bytearray()}

    def data(direction: Direction, ts: int, offset: int, plain: bytes) -> None:
        assert offset == len(received[direction])
        received[direction] += plain

    def loss(*args: object) -> None:
        raise AssertionError(f"a loss in a clean exchange: {args}")

    wire, written, server = exchange(server_context, client_context)
    stream = TlsStream(Secrets(KeyLog.from_files([str(keylog)])), data, loss, loss)
    for ts, (direction, offset, piece) in enumerate(wire.segments):
        stream.on_data(direction, ts, offset, piece)
    stream.on_close(len(wire.segments))

    assert server.cipher()[0] == suite
    assert {d: bytes(r) for d, r in received.items()} == written
    fields = stream.connection_fields()
    assert fields["tls_version"] == f"TLS {version}"
    assert fields["tls_cipher"] == iana
    assert fields["tls_status"] == "decrypted"
