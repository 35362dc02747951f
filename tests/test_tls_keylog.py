"""NSS key logs: every line found again by its client random, whatever the file's chunks;
lines of other labels, comments and blank lines skipped; malformed lines counted."""

from __future__ import annotations

import random

import pytest

from pwcap.decode.tls import keylog as module
from pwcap.decode.tls.keylog import KeyLog, KeyLogError

TLS13 = [
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0",
    "SERVER_TRAFFIC_SECRET_0",
]


def sessions(count: int, seed: int = 1) -> dict[bytes, dict[str, bytes]]:
    """Random sessions: half TLS 1.2 (a master secret), half TLS 1.3 (four secrets)."""
    rng = random.Random(seed)
    found = {}
    for i in range(count):
        labels = ["CLIENT_RANDOM"] if i % 2 else TLS13
        size = 48 if i % 2 else rng.choice([32, 48])
        found[rng.randbytes(32)] = {label: rng.randbytes(size) for label in labels}
    return found


def lines(logged: dict[bytes, dict[str, bytes]]) -> list[str]:
    return [
        f"{label} {random.hex()} {secret.hex()}"
        for random, secrets in logged.items()
        for label, secret in secrets.items()
    ]


@pytest.mark.parametrize("chunk", [64, 1000, module.CHUNK])
def test_every_session_is_found_whatever_the_chunks(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(module, "CHUNK", chunk)
    logged = sessions(200)
    path = tmp_path / "keys.log"
    path.write_text("# SSL/TLS secrets log file\n" + "\n".join(lines(logged)))  # no last newline
    keylog = KeyLog.from_files([str(path)])
    for client_random, secrets in logged.items():
        assert keylog.secrets(client_random) == secrets
    assert keylog.secrets(bytes(32)) == {}
    assert keylog.malformed == 0


def test_other_labels_comments_and_blank_lines_are_skipped_malformed_ones_counted(tmp_path):
    logged = sessions(4)
    client_random = next(iter(logged))
    other = [
        "",
        "   ",
        "# a comment",
        f"EXPORTER_SECRET {client_random.hex()} {'ab' * 32}",  # a label a decoder needs not
        f"CLIENT_TRAFFIC_SECRET_1 {client_random.hex()} {'cd' * 32}",  # after a key update
        f"RSA {'ab' * 8} {'cd' * 48}",
    ]
    malformed = [
        "CLIENT_RANDOM",
        f"CLIENT_RANDOM {client_random.hex()}",
        f"CLIENT_RANDOM {client_random.hex()[:-2]} {'ab' * 48}",  # a short client random
        f"CLIENT_RANDOM {client_random.hex()} {'ab' * 47}a",  # an odd number of digits
        f"CLIENT_RANDOM {'zz' * 32} {'ab' * 48}",
        "x" * 2000,
    ]
    text = "\r\n".join(other + lines(logged) + malformed).upper()  # upper-case hex, CRLF
    path = tmp_path / "keys.log"
    path.write_text(text)
    keylog = KeyLog.from_files([str(path)])
    assert keylog.malformed == len(malformed)
    assert keylog.lines == len(other) + len(lines(logged)) + len(malformed)
    for client_random, secrets in logged.items():
        assert keylog.secrets(client_random) == secrets


def test_embedded_secrets_add_to_one_in_memory_key_log():
    keylog = KeyLog()
    first, second = sessions(3, seed=2), sessions(3, seed=3)
    keylog.add_bytes("\n".join(lines(first)).encode())  # no newline at the end
    keylog.add_bytes("\n".join(lines(second)).encode() + b"\n")
    for client_random, secrets in {**first, **second}.items():
        assert keylog.secrets(client_random) == secrets


def test_an_unreadable_key_log_is_an_error_naming_it(tmp_path):
    with pytest.raises(KeyLogError, match=r"missing\.log"):
        KeyLog.from_files([str(tmp_path / "missing.log")])
