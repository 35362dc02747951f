"""Where one capture's TLS secrets come from: the key logs of the run, the capture's own
Decryption Secrets Blocks, and the TLS 1.2 sessions decrypted earlier in it (a resumed
session reuses its master secret, found by session id or ticket, as Wireshark does)."""

from __future__ import annotations

from collections import OrderedDict

from .keylog import KeyLog

MAX_SESSIONS = 10_000  # TLS 1.2 sessions remembered for resumption (about 200 B each)
TLS_KEY_LOG = 0x544C534B  # the secrets type of a DSB that holds an NSS key log ("TLSK")


class Secrets:
    """The secrets one capture's connections are decrypted with."""

    def __init__(self, keylog: KeyLog | None = None) -> None:
        self._files = keylog
        self._embedded: KeyLog | None = None
        self._sessions: OrderedDict[bytes, bytes] = OrderedDict()  # id or ticket -> master

    def add_block(self, secrets_type: int, data: bytes) -> None:
        """A pcapng Decryption Secrets Block: its key log lines, if it holds TLS ones."""
        if secrets_type != TLS_KEY_LOG:
            return
        if self._embedded is None:
            self._embedded = KeyLog()
        self._embedded.add_bytes(data)

    @property
    def any(self) -> bool:
        """Whether there is any secret at all (else a TLS connection is not tried)."""
        return bool(self._files) or self._embedded is not None

    def lookup(self, client_random: bytes) -> dict[str, bytes]:
        """The secrets logged for a session, by label: the embedded ones win."""
        found: dict[str, bytes] = {}
        for keylog in (self._files, self._embedded):
            if keylog:
                found.update(keylog.secrets(client_random))
        return found

    # -- TLS 1.2 resumption ----------------------------------------------------------------

    def remember(self, key: bytes, master: bytes) -> None:
        """A session id or ticket of a decrypted session, for the sessions resuming it."""
        if not key:
            return
        sessions = self._sessions
        sessions[key] = master
        sessions.move_to_end(key)
        while len(sessions) > MAX_SESSIONS:
            sessions.popitem(last=False)

    def resumed(self, key: bytes) -> bytes | None:
        """The master secret of the session with this id or ticket, if one was decrypted."""
        return self._sessions.get(key) if key else None
