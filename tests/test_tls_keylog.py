"""NSS key logs: every line found again by its client random, whatever the file's chunks;
lines of other labels, comments and blank lines skipped; malformed lines counted."""

from __future__ import annotations

import importlib.util
import random
import re

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


def test_a_sessions_lines_are_found_together_or_far_apart_in_the_file(tmp_path):
    """Lines of one session written together are read back at once; lines scattered over
    the file (a key log appended to by several processes) one by one: the same secrets."""
    logged = sessions(120, seed=7)
    together = lines(logged)
    scattered = sorted(together, key=lambda line: (line.split()[0], line.split()[1]))
    for name, text in (("together", together), ("scattered", scattered)):
        path = tmp_path / f"{name}.log"
        path.write_text("\n".join(text) + "\n")
        keylog = KeyLog.from_files([str(path)])
        for client_random, secrets in logged.items():
            assert keylog.secrets(client_random) == secrets, name


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


# The NSS key log line, as a regular expression: the grammar the loader's byte scan keeps.
NSS_LINE = re.compile(r"([A-Z0-9_]+) ([0-9a-fA-F]+) ([0-9a-fA-F]+)[ \t]*\r?")


def expected_malformed(line: str) -> bool:
    """Whether the loader must count ``line`` as malformed, by the regular expression."""
    found = NSS_LINE.fullmatch(line) if len(line) <= module.MAX_LINE else None
    if found is None:
        stripped = line.strip(" \t\n\r\x0b\x0c")
        return len(line) > module.MAX_LINE or bool(stripped and stripped[0] != "#")
    label, random_hex, secret = found.groups()
    return len(secret) % 2 == 1 or (label in module.LABELS and len(random_hex) != 64)


def damaged_lines(count: int, seed: int) -> list[str]:
    """Key log lines, most of them damaged in one place: a character changed, dropped or
    doubled, among those the grammar turns on."""
    rng = random.Random(seed)
    alphabet = " \t\r#_09afAFgGzZ\x0b"
    found = []
    for line in [*lines(sessions(count, seed)), "", " # note", "\t", "x" * 600]:
        if rng.random() < 0.8 and line:
            at = rng.randrange(len(line))
            change = rng.choice(["set", "drop", "double"])
            if change == "set":
                line = line[:at] + rng.choice(alphabet) + line[at + 1 :]
            elif change == "drop":
                line = line[:at] + line[at + 1 :]
            else:
                line = line[:at] + line[at] + line[at:]
        found.append(line)
    return found


def interpreted_module():
    """keylog.py loaded from its source, whatever engine the tests run."""
    spec = importlib.util.spec_from_file_location(
        "keylog_source", module.__file__.split(".")[0] + ".py"
    )
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@pytest.mark.parametrize("seed", range(4))
def test_damaged_lines_are_judged_as_the_nss_grammar_says_by_both_engines(tmp_path, seed):
    damaged = damaged_lines(300, seed)
    path = tmp_path / "keys.log"
    path.write_bytes("\n".join(damaged).encode())
    for engine in (module, interpreted_module()):
        keylog = engine.KeyLog.from_files([str(path)])
        assert keylog.lines == len(damaged)
        assert keylog.malformed == sum(map(expected_malformed, damaged)), engine.__file__
