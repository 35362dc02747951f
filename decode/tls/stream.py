"""One TLS connection as a transform: its ciphertext stream in, its plaintext stream out.

:class:`TlsStream` takes reassembly's events of one connection (bytes and gaps per
direction), walks each direction's records, follows the handshake (version, suite, SNI,
ALPN, client certificate, resumption) and, with the session's secrets, decrypts the
protected records: the application data goes on as the connection's byte stream, each
byte timed by the capture record that completed its TLS record. What it cannot decrypt
or trust becomes an anomaly; nothing unauthenticated is ever passed on.

After a loss (a TCP gap, a record that does not authenticate) a direction resumes only
at a record that authenticates again: the next record when the lost one's end is known,
else the first header found after the loss whose record opens with one of the sequence
numbers the loss can have skipped (a bounded number of trials, then the direction is
given up). The plaintext offsets then skip the bytes the lost records held, as far as
their sizes tell.
"""

from __future__ import annotations

from collections.abc import Callable

import cython

from ...capture.events import Direction
from .handshake import (
    CERTIFICATE,
    CLIENT_HELLO,
    END_OF_EARLY_DATA,
    FINISHED,
    KEY_UPDATE,
    NEW_SESSION_TICKET,
    SERVER_HELLO,
    VERSION_NAMES,
    ClientHello,
    HandshakeError,
    Messages,
    ServerHello,
    certificate_count,
    client_hello,
    key_update_requested,
    server_hello,
    session_ticket,
)
from .hello import MAX_RECORD, MAX_RECORD_13
from .keys import Secrets
from .protection import protection
from .schedule import key_block, next_secret, traffic_keys
from .suites import CBC, CCM8, SUITES, Suite, suite_name

if cython.compiled:  # protection.pxd: a record's `open` is a C call
    from cython.cimports.pwcap.decode.tls.protection import Protection, Tls13
else:
    from .protection import Protection, Tls13

CHANGE_CIPHER_SPEC, ALERT, HANDSHAKE, APPLICATION_DATA, HEARTBEAT = 20, 21, 22, 23, 24
# The directions as plain names: an enum class's attribute costs a metaclass lookup.
C2B, B2C = Direction.C2B, Direction.B2C
TLS12, TLS13 = 0x0303, 0x0304
MAX_TRIALS = 4096  # decryptions tried to resume one direction after a loss, then given up
# Outcomes (the `tls_status` column and the summary's reasons).
DECRYPTED, NO_KEYS, HANDSHAKE_MISSING = "decrypted", "no_keys", "handshake_missing"
WRONG_KEYS, UNSUPPORTED, HANDSHAKE_FAILED = "wrong_keys", "unsupported", "handshake_failed"
ALERTS = {
    0: "close_notify",
    10: "unexpected_message",
    20: "bad_record_mac",
    40: "handshake_failure",
    42: "bad_certificate",
    43: "unsupported_certificate",
    44: "certificate_revoked",
    45: "certificate_expired",
    46: "certificate_unknown",
    47: "illegal_parameter",
    48: "unknown_ca",
    49: "access_denied",
    50: "decode_error",
    51: "decrypt_error",
    70: "protocol_version",
    71: "insufficient_security",
    80: "internal_error",
    86: "inappropriate_fallback",
    90: "user_canceled",
    109: "missing_extension",
    110: "unsupported_extension",
    112: "unrecognized_name",
    116: "certificate_required",
    120: "no_application_protocol",
}

# A direction's mode: records in the clear (the handshake), protected and read, lost (a
# loss: hunting for a record that authenticates), opaque (protected, no keys: skipped).
# C constants when compiled: a module global is a dict lookup at every record.
CLEAR = cython.declare(cython.int, 0)
PROTECTED = cython.declare(cython.int, 1)
LOST = cython.declare(cython.int, 2)
OPAQUE = cython.declare(cython.int, 3)
_APPLICATION_DATA = cython.declare(cython.int, APPLICATION_DATA)
_CHANGE_CIPHER_SPEC = cython.declare(cython.int, CHANGE_CIPHER_SPEC)
_HEARTBEAT = cython.declare(cython.int, HEARTBEAT)

DataOut = Callable[[Direction, int, int, bytes], None]
GapOut = Callable[[Direction, int, int, int], None]
# direction (None: the connection), ts, offset, size, kind, detail
AnomalyOut = Callable[[Direction | None, int, int | None, int | None, str, str], None]


@cython.cclass
class _Side:
    """One direction: its records in progress, keys, sequence number and plaintext.

    Compiled, a C struct: every record reads and writes several of its fields."""

    direction = cython.declare(object, visibility="public")
    pieces = cython.declare(list, visibility="public")
    held = cython.declare(cython.Py_ssize_t, visibility="public")
    need = cython.declare(cython.Py_ssize_t, visibility="public")
    start = cython.declare(cython.longlong, visibility="public")
    skip = cython.declare(cython.longlong, visibility="public")
    mode = cython.declare(cython.int, visibility="public")
    protection = cython.declare(Protection, visibility="public")
    pending = cython.declare(object, visibility="public")
    seq = cython.declare(cython.ulonglong, visibility="public")  # 64 bits, never wraps
    secret = cython.declare(object, visibility="public")
    app_secret = cython.declare(object, visibility="public")
    early = cython.declare(object, visibility="public")
    early_seq = cython.declare(object, visibility="public")
    messages = cython.declare(object, visibility="public")
    plain = cython.declare(cython.longlong, visibility="public")
    delivered = cython.declare(cython.longlong, visibility="public")
    opened = cython.declare(cython.longlong, visibility="public")
    heard = cython.declare(cython.longlong, visibility="public")
    failed = cython.declare(cython.bint, visibility="public")
    finished = cython.declare(cython.bint, visibility="public")
    lost_at = cython.declare(cython.longlong, visibility="public")
    lost_seq = cython.declare(object, visibility="public")
    trials = cython.declare(cython.longlong, visibility="public")

    def __init__(self, direction: Direction) -> None:
        self.direction = direction
        self.pieces: list[bytes] = []  # bytes of records not yet whole
        self.held = 0  # their length
        self.need = 5  # bytes the record in progress needs (at first its header's 5)
        self.start = 0  # stream offset of the first byte held
        self.skip = 0  # bytes to drop before the next record (the rest of a lost one)
        self.mode = CLEAR
        self.protection: Protection | None = None
        self.pending: Protection | None = None  # TLS 1.2: in force after ChangeCipherSpec
        self.seq = 0
        self.secret: bytes | None = None  # TLS 1.3: the traffic secret in force
        self.app_secret: bytes | None = None  # TLS 1.3: the first application secret
        self.early: Protection | None = None  # TLS 1.3: 0-RTT data, while it may come
        self.early_seq = 0
        self.messages = Messages()
        self.plain = 0  # the plaintext stream's offset (past bytes lost too)
        self.delivered = 0  # plaintext bytes passed on
        self.opened = 0  # protected records that authenticated
        self.heard = 0  # records it sent
        self.failed = False  # a protected record failed to authenticate at some time
        self.finished = False  # TLS 1.3: its handshake ended (Finished sent)
        self.lost_at = 0  # stream offset where the loss began (the first record lost)
        self.lost_seq = 0  # the sequence number of that record
        self.trials = 0  # decryptions tried since the loss


@cython.cclass
class TlsStream:
    """The transform of one TLS connection, fed as a ConnectionDecoder is (compiled: its
    fields are C's, and the record walk C calls)."""

    data_out = cython.declare(object, visibility="public")
    hello = cython.declare(object, visibility="readonly")
    server = cython.declare(object, visibility="readonly")
    suite = cython.declare(object, visibility="readonly")
    version = cython.declare(object, visibility="readonly")
    client_cert = cython.declare(object, visibility="readonly")
    resumed = cython.declare(object, visibility="readonly")
    status = cython.declare(object, visibility="readonly")
    _secrets = cython.declare(object)
    _gap = cython.declare(object)
    _anomaly = cython.declare(object)
    _sides = cython.declare(tuple)
    _master = cython.declare(object)
    _records = cython.declare(cython.longlong)
    _missing_said = cython.declare(cython.bint)
    _alert = cython.declare(object)
    _max = cython.declare(cython.Py_ssize_t)

    def __init__(self, secrets: Secrets, data: DataOut, gap: GapOut, anomaly: AnomalyOut) -> None:
        self._secrets = secrets
        self.data_out = data  # the plaintext's reader: the dispatcher may change it
        self._gap = gap
        self._anomaly = anomaly
        self._sides = (_Side(C2B), _Side(B2C))
        self.hello: ClientHello | None = None
        self.server: ServerHello | None = None
        self.suite: Suite | None = None
        self.version: int | None = None
        self.client_cert: bool | None = None
        self.resumed: bool | None = None
        self.status: str | None = None  # an outcome known early: no keys, unsupported
        self._master: bytes | None = None  # TLS 1.2: the session's, for its tickets
        self._records = 0  # records walked, both directions
        self._missing_said = False
        self._alert: int | None = None  # the description of an alert sent in the clear
        self._max = MAX_RECORD  # the longest record the version allows (a C field compiled)

    # -- the events of the connection ------------------------------------------------------

    @cython.locals(side=_Side, pieces=list)
    def on_data(self, direction: Direction, ts: int, offset: int, data: bytes) -> None:
        side = self._sides[direction]
        if side.mode == OPAQUE:
            return
        if side.skip:
            if len(data) <= side.skip:
                side.skip -= len(data)
                return
            data = data[side.skip :]
            offset += side.skip
            side.skip = 0
        if not side.held:
            side.start = offset
            if len(data) >= side.need:  # nothing held: the segment is walked as it came
                self._walk(side, data, ts)
                return
        pieces = side.pieces
        pieces.append(data)
        side.held += len(data)
        if side.held >= side.need:
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            pieces.clear()
            self._walk(side, data, ts)

    @cython.locals(side=_Side)
    def on_gap(self, direction: Direction, ts: int, offset: int, size: int) -> None:
        side = self._sides[direction]
        if side.mode == OPAQUE:
            return
        self._anomaly(
            direction,
            ts,
            offset,
            size,
            "gap",
            f"{size} bytes missing from the capture in a TLS stream: the records they touched"
            " are lost; this direction resumes at the next record that authenticates",
        )
        held = b"".join(side.pieces)
        resume = offset + size
        side.pieces.clear()
        side.held, side.need, side.skip = 0, 5, 0
        if side.mode == CLEAR:
            side.messages = Messages()  # a handshake message may have been cut
            if side.pending is None:
                side.mode = OPAQUE  # no keys to find a record with: nothing more to read
                return
            side.protection, side.pending, side.seq = side.pending, None, 0
        if side.mode != LOST:
            self._lose(side, side.start, side.seq)
        if len(held) >= 5 and side.start == side.lost_at and held[0] == APPLICATION_DATA:
            # the lost record's header was seen: the next one starts where it ends
            side.skip = max(side.start + 5 + (held[3] << 8 | held[4]) - resume, 0)
        side.start = resume + side.skip

    @cython.locals(side=_Side)
    def on_close(self, ts: int) -> None:
        """End of the connection: what is still held is a record cut short."""
        for side in self._sides:
            if side.mode == OPAQUE:
                continue
            if side.held and side.mode != LOST:
                self._anomaly(
                    side.direction,
                    ts,
                    side.start,
                    side.held,
                    "tls_truncated",
                    f"the stream ended inside a TLS record ({side.held} bytes of it captured)",
                )
            if side.mode == LOST:
                self._give_up(side, ts)
        refused = self._alert is not None or not self._sides[B2C].heard
        if self.hello is not None and self.server is None and self.status is None and refused:
            self._handshake_failed(ts)
            return
        if self._records and (self.hello is None or self.server is None):
            self._handshake_missing(None, ts, None)

    def _handshake_failed(self, ts: int) -> None:
        """A ClientHello the server refused (an alert) or never answered."""
        self.status = HANDSHAKE_FAILED
        if self._alert is None:
            why = "the server never answered the ClientHello"
        else:
            name = ALERTS.get(self._alert, "an alert")
            why = f"an alert ended it: {self._alert} ({name})"
        detail = f"the TLS handshake failed ({self._describe()}): {why}"
        self._anomaly(None, ts, None, None, "tls_handshake_failed", detail)

    # -- outcome ---------------------------------------------------------------------------

    @property
    @cython.locals(client=_Side, server=_Side)
    def outcome(self) -> str:
        """Whether the connection was decrypted, and if not why."""
        if self.status is not None:
            return self.status
        if self.hello is None or self.server is None:
            return HANDSHAKE_MISSING
        client, server = self._sides
        if not (client.opened or server.opened) and (client.failed or server.failed):
            return WRONG_KEYS
        return DECRYPTED

    @property
    @cython.locals(client=_Side, server=_Side)
    def plaintext(self) -> int:
        """Plaintext bytes passed on, both directions."""
        client, server = self._sides
        return client.delivered + server.delivered

    def connection_fields(self) -> dict[str, object]:
        """The connection's ``tls_*`` columns."""
        hello = self.hello
        outcome = self.outcome
        return {
            "tls_version": VERSION_NAMES.get(self.version or 0),
            "tls_cipher": suite_name(self.server.suite) if self.server is not None else None,
            "tls_sni": hello.sni if hello is not None else None,
            "tls_alpn": ",".join(hello.alpn) if hello is not None and hello.alpn else None,
            "tls_client_cert": self.client_cert,
            "tls_resumed": self.resumed,
            "tls_status": outcome,
            "tls_decrypted": outcome == DECRYPTED,
        }

    def _describe(self) -> str:
        """Version, SNI and suite as far as known, for an anomaly's detail."""
        parts = []
        if self.version is not None:
            parts.append(VERSION_NAMES.get(self.version, f"version 0x{self.version:04X}"))
        if self.hello is not None and self.hello.sni:
            parts.append(f"SNI {self.hello.sni}")
        if self.server is not None:
            parts.append(suite_name(self.server.suite))
        return ", ".join(parts) or "no handshake seen"

    # -- the record walk -------------------------------------------------------------------

    @cython.cfunc
    @cython.locals(
        side=_Side,
        data=bytes,
        end=cython.Py_ssize_t,
        pos=cython.Py_ssize_t,
        length=cython.Py_ssize_t,
        kind=cython.int,
        mode=cython.int,
        offset=cython.longlong,
        size=cython.Py_ssize_t,
        at=cython.Py_ssize_t,
        opened=tuple,
        plain=bytes,
    )
    def _walk(self, side: _Side, data: bytes, ts: int) -> None:
        """Every whole record of ``data``, the bytes ``side`` holds (none kept apart), in
        turn; the rest stays held. Application data under keys in force is the hot path:
        one decrypt call on the bytes held (no copy of the record), one delivery."""
        end = len(data)
        pos = 0
        side.need = 5
        while end - pos >= 5:
            mode = side.mode
            if mode == LOST:
                pos, resumed = self._hunt(side, data, pos, ts)
                if not resumed:
                    break
                continue
            if mode == OPAQUE:
                pos = end
                break
            kind = data[pos]
            length = data[pos + 3] << 8 | data[pos + 4]
            if not (_CHANGE_CIPHER_SPEC <= kind <= _HEARTBEAT and data[pos + 1] == 3) or (
                length > self._max
            ):
                pos = self._bad_header(side, data, pos, ts)
                continue
            if end - pos - 5 < length:
                side.need = 5 + length
                break
            self._records += 1
            side.heard += 1
            offset = side.start + pos
            at = pos
            pos += 5 + length
            if mode != PROTECTED or kind != _APPLICATION_DATA:
                self._record(side, kind, data[at : at + 5], data[at + 5 : pos], ts, offset)
                continue
            opened = side.protection.open_at(side.seq, data, at, length)
            if opened is None:
                self._not_opened(side, data[at : at + 5], data[at + 5 : pos], ts, offset)
                continue
            side.seq += 1
            side.opened += 1
            side.early = None
            plain = opened[1]
            size = len(plain)
            if opened[0] == _APPLICATION_DATA and size:
                self.data_out(side.direction, ts, side.plain, plain)
                side.plain += size
                side.delivered += size
            else:
                self._opened(side, opened[0], plain, ts, offset)
        if pos < end:
            side.pieces.append(data[pos:] if pos else data)
        side.held = end - pos
        side.start += pos

    @cython.locals(side=_Side)
    def _bad_header(self, side: _Side, data: bytes, pos: int, ts: int) -> int:
        """A record header no TLS peer sends: the record boundaries are lost there."""
        if side.mode == CLEAR and self.hello is None:
            side.mode = OPAQUE  # joined mid-record, before any handshake: nothing to read
            return len(data)
        self._anomaly(
            side.direction,
            ts,
            side.start + pos,
            None,
            "tls_bad_record",
            f"not a TLS record header (type {data[pos]}, version {data[pos + 1]}.{data[pos + 2]},"
            f" length {data[pos + 3] << 8 | data[pos + 4]}): the record boundaries are lost",
        )
        if side.mode == PROTECTED:
            self._lose(side, side.start + pos, side.seq)
            return pos
        side.mode = OPAQUE  # in the clear: no key to find the next record with
        return len(data)

    @cython.cfunc
    @cython.locals(side=_Side)
    def _record(
        self, side: _Side, kind: int, header: bytes, body: bytes, ts: int, offset: int
    ) -> None:
        if kind == CHANGE_CIPHER_SPEC and (self.version == TLS13 or side.protection is None):
            self._change_cipher_spec(side, ts, offset)
            return
        if side.protection is None:
            if kind == HANDSHAKE:
                self._handshake(side, body, ts, offset)
            elif kind == APPLICATION_DATA:
                self._unreadable(side, ts, offset)
            elif kind == ALERT and len(body) == 2 and body[0] == 2:  # fatal, in the clear
                self._alert = body[1]
            return
        opened = side.protection.open(side.seq, header, body)
        if opened is None:
            self._not_opened(side, header, body, ts, offset)
            return
        side.seq += 1
        side.opened += 1
        side.early = None
        self._opened(side, opened[0], opened[1], ts, offset)

    @cython.locals(side=_Side)
    def _not_opened(self, side: _Side, header: bytes, body: bytes, ts: int, offset: int) -> None:
        """A protected record that did not authenticate: 0-RTT data the server may have
        refused, or a loss."""
        if not side.opened and side.direction == C2B and self._early_data():
            self._early(side, header, body, ts, offset)
            return
        self._lose(side, offset, side.seq)
        self._auth_failed(side, ts, offset, len(body) + 5)

    @cython.cfunc
    @cython.locals(side=_Side)
    def _opened(self, side: _Side, kind: int, plain: bytes, ts: int, offset: int) -> None:
        """A record that authenticated: its content, by its (inner) type."""
        if kind == APPLICATION_DATA:
            if plain:
                self.data_out(side.direction, ts, side.plain, plain)
                side.plain += len(plain)
                side.delivered += len(plain)
        elif kind == HANDSHAKE:
            self._handshake(side, plain, ts, offset)
        elif kind == CHANGE_CIPHER_SPEC:
            self._change_cipher_spec(side, ts, offset)

    @cython.locals(side=_Side)
    def _change_cipher_spec(self, side: _Side, ts: int, offset: int) -> None:
        """TLS 1.2: the direction's next records are protected with the new keys (TLS 1.3
        sends it for middleboxes' sake alone)."""
        if self.version == TLS13:
            return
        if side.direction == C2B and self.client_cert is None and self.server:
            self.client_cert = False  # its Certificate would have come before
        if side.pending is not None:
            side.protection, side.pending, side.seq = side.pending, None, 0
            side.mode = PROTECTED
        else:
            side.mode = OPAQUE  # no keys (said when the ServerHello was read), or no handshake
            if self.server is None:
                self._handshake_missing(side.direction, ts, offset)

    @cython.locals(side=_Side)
    def _unreadable(self, side: _Side, ts: int, offset: int) -> None:
        """Protected bytes with no keys in force for them."""
        side.mode = OPAQUE
        if self.server is None:
            self._handshake_missing(side.direction, ts, offset)

    def _handshake_missing(self, direction: Direction | None, ts: int, offset: int | None) -> None:
        if self._missing_said or self.status is not None:
            return
        self._missing_said = True
        seen = "no ClientHello" if self.hello is None else "no ServerHello"
        self._anomaly(
            direction,
            ts,
            offset,
            None,
            "tls_handshake_missing",
            f"TLS without its handshake ({seen} in the capture: it began after the handshake"
            " or lost it): the session is unknown, so it cannot be decrypted",
        )

    # -- the handshake ---------------------------------------------------------------------

    @cython.cfunc
    @cython.locals(side=_Side)
    def _handshake(self, side: _Side, data: bytes, ts: int, offset: int) -> None:
        try:
            for kind, body in side.messages.feed(data):
                if side.direction == C2B:
                    self._client_message(side, kind, body, ts, offset)
                else:
                    self._server_message(side, kind, body, ts, offset)
        except HandshakeError as error:
            detail = f"a TLS handshake message that does not parse: {error}"
            self._anomaly(side.direction, ts, offset, len(data), "tls_bad_record", detail)

    @cython.cfunc
    @cython.locals(side=_Side)
    def _client_message(self, side: _Side, kind: int, body: bytes, ts: int, offset: int) -> None:
        if kind == CLIENT_HELLO:
            hello = client_hello(body)
            if self.hello is not None and self.hello.random != hello.random:
                self.server = None  # a new handshake (TLS 1.2 renegotiation)
            self.hello = hello
        elif kind == CERTIFICATE:
            self.client_cert = certificate_count(body, self.version == TLS13) > 0
        elif kind == FINISHED:
            self._finished(side, ts, offset, "CLIENT_TRAFFIC_SECRET_0")
        elif kind == KEY_UPDATE:
            self._key_update(side, body)
        elif kind == END_OF_EARLY_DATA:
            side.early = None

    @cython.cfunc
    @cython.locals(side=_Side)
    def _server_message(self, side: _Side, kind: int, body: bytes, ts: int, offset: int) -> None:
        tls13 = self.version == TLS13
        if kind == SERVER_HELLO:
            self._server_hello(server_hello(body), ts, offset)
        elif kind == NEW_SESSION_TICKET and not tls13 and self._master is not None:
            self._secrets.remember(session_ticket(body, False), self._master)
        elif kind == FINISHED:
            self._finished(side, ts, offset, "SERVER_TRAFFIC_SECRET_0")
        elif kind == KEY_UPDATE:
            self._key_update(side, body)

    @cython.cfunc
    @cython.locals(side=_Side)
    def _finished(self, side: _Side, ts: int, offset: int, label: str) -> None:
        """TLS 1.3: the sender's next records use its first application secret (a later
        Finished ends post-handshake authentication: no change of keys)."""
        if side.direction == C2B and self.client_cert is None:
            self.client_cert = False  # its Certificate would have come before
        if self.version != TLS13 or side.protection is None or side.finished:
            return
        side.finished = True
        if side.app_secret is None:
            self._no_keys(side.direction, ts, offset, label)
        else:
            self._install_13(side, side.app_secret)

    @cython.cfunc
    def _server_hello(self, hello: ServerHello, ts: int, offset: int) -> None:
        self.version = hello.version
        self._max = MAX_RECORD_13 if hello.version == TLS13 else MAX_RECORD
        if hello.retry:  # a HelloRetryRequest: the real ServerHello answers the next hello
            return
        self.server = hello
        if self.hello is None:
            self._handshake_missing(B2C, ts, offset)
            return
        if hello.version not in (TLS12, TLS13):
            version = VERSION_NAMES.get(hello.version, f"0x{hello.version:04X}")
            self._unsupported(ts, offset, f"{version}: pwcap decrypts TLS 1.2 and 1.3")
            return
        suite = SUITES.get(hello.suite)
        if suite is None or suite.tls13 != (hello.version == TLS13):
            why = f"cipher suite {suite_name(hello.suite)}: not one pwcap decrypts"
            self._unsupported(ts, offset, why)
            return
        self.suite = suite
        if not self._secrets.any:
            self._no_keys(None, ts, offset, None)
            return
        found = self._secrets.lookup(self.hello.random)
        if suite.tls13:
            self.resumed = hello.psk
            self._keys_13(suite, found, ts, offset)
        else:
            self._keys_12(suite, hello, found, ts, offset)

    @cython.cfunc
    @cython.locals(client=_Side, server=_Side, side=_Side)
    def _keys_13(self, suite: Suite, found: dict[str, bytes], ts: int, offset: int) -> None:
        client, server = self._sides
        early = found.get("CLIENT_EARLY_TRAFFIC_SECRET")
        if early is not None and self._early_data():
            client.early = Tls13(suite, traffic_keys(suite, early))
        missing = []
        for side, handshake_label, traffic_label in (
            (client, "CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"),
            (server, "SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_TRAFFIC_SECRET_0"),
        ):
            handshake = found.get(handshake_label)
            side.app_secret = found.get(traffic_label)
            if handshake is None:
                missing.append(handshake_label)
            else:
                self._install_13(side, handshake)
        if len(missing) == 2:
            self._no_keys(None, ts, offset, " or ".join(missing))
        elif missing:
            direction = C2B if missing[0].startswith("CLIENT") else B2C
            self._no_keys(direction, ts, offset, missing[0])

    @cython.cfunc
    @cython.locals(side=_Side, current=Tls13)
    def _install_13(self, side: _Side, secret: bytes) -> None:
        assert self.suite is not None
        keys = traffic_keys(self.suite, secret)
        if isinstance(side.protection, Tls13):
            current = side.protection
            side.protection = current.rekeyed(self.suite, keys)
        else:
            side.protection = Tls13(self.suite, keys)
        side.secret = secret
        side.seq = 0
        if side.mode == CLEAR:
            side.mode = PROTECTED

    @cython.locals(side=_Side)
    def _key_update(self, side: _Side, body: bytes) -> None:
        """TLS 1.3: the sender's next records use the next secret of its chain (the
        peer's own update, when asked for, comes as the peer's KeyUpdate)."""
        key_update_requested(body)  # checks the message
        if self.version == TLS13 and side.secret is not None and self.suite is not None:
            self._install_13(side, next_secret(self.suite, side.secret))

    @cython.locals(client=_Side, server=_Side)
    def _keys_12(
        self, suite: Suite, hello: ServerHello, found: dict[str, bytes], ts: int, offset: int
    ) -> None:
        offered = self.hello
        assert offered is not None
        resumed = bool(hello.session_id) and hello.session_id == offered.session_id
        self.resumed = resumed
        master = found.get("CLIENT_RANDOM")
        if master is None and resumed:
            master = self._secrets.resumed(hello.session_id)
            if master is None and offered.ticket:
                master = self._secrets.resumed(offered.ticket)
        if master is None:
            self._no_keys(None, ts, offset, "CLIENT_RANDOM")
            return
        self._master = master
        self._secrets.remember(hello.session_id, master)
        if offered.ticket:
            self._secrets.remember(offered.ticket, master)
        client_keys, server_keys = key_block(suite, master, offered.random, hello.random)
        etm = hello.encrypt_then_mac and suite.cipher == CBC
        client, server = self._sides
        client.pending = protection(suite, client_keys, etm)
        server.pending = protection(suite, server_keys, etm)

    def _early_data(self) -> bool:
        return self.version == TLS13 and self.hello is not None and self.hello.early_data

    @cython.locals(side=_Side)
    def _early(self, side: _Side, header: bytes, body: bytes, ts: int, offset: int) -> None:
        """TLS 1.3 0-RTT: a client record ahead of its handshake records, read with the
        early secret when it was logged, else skipped (the server may refuse it too)."""
        if side.early is None:
            return
        opened = side.early.open(side.early_seq, header, body)
        if opened is not None:
            side.early_seq += 1
            self._opened(side, opened[0], opened[1], ts, offset)

    @cython.locals(side=_Side)
    def _no_keys(
        self, direction: Direction | None, ts: int, offset: int | None, label: str | None
    ) -> None:
        """No secret for one direction (or both: None): its protected records are skipped."""
        for side in self._sides if direction is None else (self._sides[direction],):
            side.pending = side.protection = None
            side.mode = OPAQUE if direction is not None else side.mode
        if self.status is not None:
            return
        self.status = NO_KEYS
        if label is None:
            why = "no key log was given (--tls-keylog) and the capture embeds no secrets"
        else:
            why = f"no {label} line for this session in the key logs"
        detail = f"TLS not decrypted ({self._describe()}): {why}"
        self._anomaly(direction, ts, offset, None, "tls_no_keys", detail)

    @cython.locals(side=_Side)
    def _unsupported(self, ts: int, offset: int, why: str) -> None:
        self.status = UNSUPPORTED
        for side in self._sides:
            side.protection = side.pending = None
        detail = f"TLS not decrypted ({self._describe()}): {why}"
        self._anomaly(None, ts, offset, None, "tls_unsupported", detail)

    # -- losses and resynchronisation --------------------------------------------------------

    @cython.locals(side=_Side)
    def _auth_failed(self, side: _Side, ts: int, offset: int, size: int) -> None:
        if not side.opened and not side.failed:
            why = "the key log's secret for this session is wrong, or the record is damaged"
        else:
            why = "the record is damaged"
        side.failed = True
        self._anomaly(
            side.direction,
            ts,
            offset,
            size,
            "tls_auth_failed",
            f"a TLS record did not authenticate ({why}): this direction resumes at the next"
            " record that authenticates",
        )

    @cython.locals(side=_Side)
    def _lose(self, side: _Side, at: int, seq: int) -> None:
        """The records from stream offset ``at`` (sequence number ``seq``) on are lost."""
        if side.mode == LOST:
            return
        side.mode = LOST
        side.lost_at = at
        side.lost_seq = seq
        side.trials = 0

    @cython.locals(side=_Side)
    def _hunt(self, side: _Side, data: bytes, pos: int, ts: int) -> tuple[int, bool]:
        """LOST: the first application data record at or after ``pos`` that authenticates
        with a sequence number the loss can have skipped. Returns where the walk goes on
        and whether it resumed; if not, the bytes from there on are kept for later."""
        protection = side.protection
        end = len(data)
        assert protection is not None
        while True:
            at = data.find(_APPLICATION_HEADER, pos)
            if at < 0:
                return max(pos, end - 4), False  # the last bytes may begin a header
            if end - at < 5:
                return at, False
            length = data[at + 3] << 8 | data[at + 4]
            if 0 < length <= self._max:
                if end - at - 5 < length:
                    side.need = 5 + length
                    return at, False  # a candidate not yet whole
                header, body = data[at : at + 5], data[at + 5 : at + 5 + length]
                for seq in self._candidates(side, side.start + at, body):
                    side.trials += 1
                    opened = protection.open(seq, header, body)
                    if opened is not None:
                        self._resume(side, side.start + at, seq, ts)
                        self._records += 1
                        self._opened(side, opened[0], opened[1], ts, side.start + at)
                        return at + 5 + length, True
                    if side.trials >= MAX_TRIALS:
                        self._give_up(side, ts)
                        return end, True
            pos = at + 1

    @cython.locals(side=_Side)
    def _candidates(self, side: _Side, at: int, body: bytes) -> range | tuple[int]:
        """The sequence numbers a record at stream offset ``at`` can have after the loss:
        the one it states (TLS 1.2 GCM and CCM peers send it), else every one from the
        first lost to as many more as records could fit in the bytes lost."""
        assert side.protection is not None
        stated = side.protection.explicit_seq(body)
        if stated is not None and stated >= side.lost_seq:
            return (stated,)
        most = min((at - side.lost_at) // self._overhead() + 1, MAX_TRIALS)
        return range(side.lost_seq, side.lost_seq + most + 1)

    def _overhead(self) -> int:
        """The fewest bytes protection adds to a record's plaintext, header included."""
        suite = self.suite
        if suite is None or suite.tls13:
            return 5 + 16 + 1
        if suite.cipher == CBC:
            return 5 + 16 + suite.mac_size + 1
        return 5 + (8 if suite.cipher == CCM8 else 16) + (0 if suite.iv_size == 12 else 8)

    @cython.locals(side=_Side)
    def _resume(self, side: _Side, at: int, seq: int, ts: int) -> None:
        """Back in step at stream offset ``at`` with sequence number ``seq``: the
        plaintext skips what the lost records held (their bytes less what protection
        added to each, as far as that is known)."""
        records = seq - side.lost_seq
        lost = max(at - side.lost_at - records * self._overhead(), 0)
        side.mode = PROTECTED
        side.seq = seq + 1
        side.opened += 1
        self._gap(side.direction, ts, side.plain, lost)
        side.plain += lost

    @cython.locals(side=_Side)
    def _give_up(self, side: _Side, ts: int) -> None:
        """No record authenticated within the trials: the decoders learn of the loss, and
        this direction is not read again."""
        lost = max(side.start + side.held - side.lost_at, 0)
        side.mode = OPAQUE
        side.protection = None
        side.pieces.clear()
        side.held = 0
        self._gap(side.direction, ts, side.plain, lost)
        side.plain += lost


_APPLICATION_HEADER = bytes([APPLICATION_DATA, 3, 3])
