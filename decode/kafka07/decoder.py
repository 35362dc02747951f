"""Kafka07Decoder: one connection's Kafka 0.7 conversation into `frames`, `messages` and
`anomalies` rows (the :class:`pwcap.decode.api.ConnectionDecoder` contract).

Rows, one per frame on the wire:

- requests: ``command`` is the type name (``PRODUCE``, ``FETCH``, ``MULTIFETCH``,
  ``MULTIPRODUCE``, ``OFFSETS``) and ``command_type`` its number. A single request fills
  ``topic`` and ``partition``, a FETCH ``offset`` and ``max_size``; a MULTI* request fills
  topic and partition only where all its parts agree (offset and max size only with one
  part) and lists its parts in ``info``. OFFSETS puts its time and maximum count in
  ``info``. PRODUCE and MULTIPRODUCE add ``payload_size`` (message set bytes),
  ``num_messages``, ``checksum_ok`` and ``compression`` (when all messages share one).
- responses: ``command`` is the answered type plus ``_RESPONSE`` (``FETCH_RESPONSE``,
  ``MULTIFETCH_RESPONSE``, ``OFFSETS_RESPONSE``), ``command_type`` null (responses carry no
  type), ``error_code`` the 0.7 error name, ``answers`` / ``request_ts`` the request
  matched in order (see :mod:`.pairing`), whose topic, partition, offset and max size the
  response repeats (a request lost in missing bytes whose type was seen still holds its
  place: its response has ``answers`` but no ``request_ts``). An unpaired response is named
  by its body's shape and says ``unpaired`` in ``info``. ``truncated_tail`` holds the bytes
  of the partial message that ends a fetched set: normal, never an anomaly. OFFSETS
  answers list their offsets in ``info``; MULTIFETCH parts with an error are listed there
  too.

Messages (PRODUCE, MULTIPRODUCE and fetch answers) become `messages` rows, one per message
after decompression, with the topic and partition of their part and, for fetched ones, the
log offset (:mod:`.messages`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ...capture.events import LABELS, ClientBy, Connection, Direction
from ...tables.columns import ColumnBuffer
from ...tables.schema import positions
from ..api import DecodeOptions, FlipRoles, Row, RowSink
from ..conversation import Conversation
from ..framing import FrameStream
from .framing import KafkaFrames
from .messages import Budget, read_message_set
from .pairing import Pairing, Pending
from .responses import fits, guess_kind
from .rows import Sets, add_info, describe_parts, emit_messages
from .sniff import (
    find_request_start,
    find_response_start,
    looks_like_request,
    looks_like_response,
)
from .wire import (
    ANSWERED,
    HEAD,
    MAX_ERROR,
    MIN_ERROR,
    MULTIFETCH,
    OFFSETS,
    PRODUCE,
    REQUEST_NAMES,
    Part,
    WireError,
    error_name,
    read_offsets,
    read_request,
    split_parts,
)

_REQUESTS = KafkaFrames(find_request_start)
_RESPONSES = KafkaFrames(find_response_start)
# A request or response handler: (buf, start, end, offset, ts_first, ts) -> False when the
# frame does not parse (the framing is off).
Handler = Callable[[bytes, int, int, int, int, int], bool]
# The `frames` columns set here.
(
    TS,
    CAPTURE,
    CONN_ID,
    DIRECTION,
    PROTOCOL,
    TS_FIRST,
    STREAM_OFFSET,
    COMMAND,
    COMMAND_TYPE,
    FRAME_SIZE,
    PAYLOAD_SIZE,
    ERROR_CODE,
    ANSWERS,
    REQUEST_TS,
    INFO,
    TRUNCATED_TAIL,
) = positions(
    "frames",
    "ts",
    "capture",
    "conn_id",
    "direction",
    "protocol",
    "ts_first",
    "stream_offset",
    "command",
    "command_type",
    "frame_size",
    "payload_size",
    "error_code",
    "answers",
    "request_ts",
    "info",
    "truncated_tail",
)


class Kafka07Decoder:
    """Sans-IO decoder of one TCP connection carrying the Kafka 0.7 wire protocol.

    Directions are trusted when reassembly saw the handshake or a well-known port. When it
    only guessed (the sender of the first segment), the first record that starts with a
    consistent request or response settles the roles: if it came the wrong way the decoder
    says so once (``flip_roles``: reassembly labels later bytes by the new roles) and
    restarts its frame streams, which had been fed bytes under the wrong labels.
    """

    protocol = "kafka07"

    def __init__(
        self, conn: Connection, sink: RowSink, options: DecodeOptions, flip_roles: FlipRoles
    ) -> None:
        self._rows = sink.frames  # where frame rows are built
        self._messages = sink.messages
        self._capture = options.capture
        self._flip_roles = flip_roles
        self._conn_id = conn.conn_id
        self._payloads = options.payloads
        self._limit = options.max_decompressed_size
        self._max_frame = options.max_frame_size
        self._budget = options.frames
        in_sync = conn.client_by == ClientBy.SYN
        self._roles_settled = conn.client_by != ClientBy.GUESS
        self._pairing = Pairing(in_sync)
        self._conversation = Conversation(
            sink,
            options.capture,
            conn.conn_id,
            self.protocol,
            "no request was waiting for this response",
        )
        self._frames = [0, 0]
        self._streams = self._new_streams(in_sync)

    def _new_streams(self, in_sync: bool) -> list[FrameStream]:
        """The client's stream of requests and the broker's of responses, by Direction."""
        return [
            FrameStream(
                frame_format,
                partial(self._safely, label, handler),
                partial(self._stream_anomaly, label),
                self._max_frame,
                in_sync,
                partial(self._frame_lost, label),
                self._budget,
            )
            for label, frame_format, handler in (
                (0, _REQUESTS, self._request),
                (1, _RESPONSES, self._response),
            )
        ]

    # -- ConnectionDecoder ---------------------------------------------------------------

    def on_data(self, direction: Direction, ts: int, offset: int, data: bytes) -> None:
        if not self._roles_settled:
            direction = self._settle_roles(direction, data)
        self._conversation.on_data(direction, ts)
        self._streams[direction].feed(ts, offset, data)

    def on_gap(self, direction: Direction, ts: int, offset: int, size: int) -> None:
        known = self._streams[direction].on_gap(ts, offset, size)
        self._conversation.on_gap(direction)
        if not known:
            self._lose_pairing(direction, ts, offset, f"{size} bytes at offset {offset} missing")

    def on_close(self, ts: int) -> None:
        for stream in self._streams:
            stream.on_close(ts)
        self._conversation.on_close()
        # The streams call this decoder's methods: without them it is freed by reference
        # counting now, not by the cyclic collector some time later.
        self._streams = []

    def connection_fields(self) -> Row:
        return {
            "frames_c2b": self._frames[0],
            "frames_b2c": self._frames[1],
            "anomalies": self._conversation.anomalies,
        }

    def _frame_lost(self, label: int, buf: bytes, start: int, ts: int) -> None:
        """One whole frame, starting at ``buf[start]``, was not decoded (oversize, or cut
        by a gap) but its extent is known: pairing stays in step when its place in the
        order is known too."""
        if not self._pairing.in_step:
            return
        if label == 1:
            self._pairing.skip_response()  # it answered the oldest waiting request
            return
        request_type = HEAD.unpack_from(buf, start)[1] if len(buf) - start >= HEAD.size else -1
        if not 0 <= request_type < len(REQUEST_NAMES):
            self._lose_pairing(0, ts, None, "a request of unknown type was lost")
        # A response that came with no request was its answer; else it holds its place.
        elif request_type in ANSWERED and not self._conversation.withdraw_oldest():
            self._pairing.request(Pending(request_type, REQUEST_NAMES[request_type], ts, None))

    def _settle_roles(self, direction: Direction, data: bytes) -> Direction:
        """The direction ``data`` really travels, once a record proves who sends what."""
        if looks_like_request(data, self._max_frame):
            sender = Direction.C2B
        elif looks_like_response(data, self._max_frame):
            sender = Direction.B2C
        else:
            return direction
        self._roles_settled = True
        if sender != direction:
            self._flip_roles()
            for stream in self._streams:
                stream.drop()
            self._streams = self._new_streams(False)
        return sender

    def _safely(
        self,
        label: int,
        handler: Handler,
        buf: bytes,
        start: int,
        end: int,
        length: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> bool:
        """Run a frame handler (the frame's ``length`` is in its bytes too); captured bytes
        may break any assumption: report, go on."""
        try:
            return handler(buf, start, end, offset, ts_first, ts)
        except Exception as exc:
            for rows in (self._rows, self._messages, self._conversation.rows):
                rows.discard_row()  # what the frame left half built
            self._conversation.anomaly(
                label, ts, offset, end - start, None, "decode_error", repr(exc)
            )
            return True

    # -- requests ------------------------------------------------------------------------

    def _request(
        self, buf: bytes, start: int, end: int, offset: int, ts_first: int, ts: int
    ) -> bool:
        """One whole request frame; False when it does not parse (the framing is off)."""
        rows = self._frame_row(0, start, end, offset, ts_first, ts)
        try:
            request_type, parts = read_request(buf, start, end)
        except WireError as exc:
            kind = "unknown_command" if "request type" in str(exc) else "protocol_violation"
            self._conversation.frame_anomaly(kind, rows, str(exc))
            rows.discard_row()
            return False
        self._roles_settled = True
        name = REQUEST_NAMES[request_type]
        rows.set(COMMAND, name)
        rows.set(COMMAND_TYPE, request_type)
        self._frames[0] += 1
        describe_parts(rows, parts, request_type)
        if parts and parts[0].kind == PRODUCE:
            self._produced(buf, parts)
        if request_type in ANSWERED:
            self._pairing.request(Pending(request_type, name, ts, parts))
        rows.end_row()
        return True

    def _produced(self, buf: bytes, parts: list[Part]) -> None:
        sets = []
        budget = Budget(self._limit)
        for part in parts:
            sets.append((part, read_message_set(buf, part.start, part.end, None, budget)))
        self._rows.set(PAYLOAD_SIZE, sum(part.end - part.start for part in parts))
        self._emit_messages(sets)
        for part, found in sets:
            if found.tail:
                self._conversation.frame_anomaly(
                    "protocol_violation",
                    self._rows,
                    f"produced set for {part.topic}:{part.partition} ends in {found.tail} "
                    "bytes of a partial message (the broker drops them)",
                )

    # -- responses -----------------------------------------------------------------------

    def _response(
        self, buf: bytes, start: int, end: int, offset: int, ts_first: int, ts: int
    ) -> bool:
        """One whole response frame; False when its error code is not a 0.7 one."""
        rows = self._frame_row(1, start, end, offset, ts_first, ts)
        error = HEAD.unpack_from(buf, start)[1]
        if not MIN_ERROR <= error <= MAX_ERROR:
            self._conversation.frame_anomaly(
                "protocol_violation", rows, f"error code {error} is not 0.7's"
            )
            rows.discard_row()
            return False
        body = start + HEAD.size
        self._roles_settled = True
        self._frames[1] += 1
        rows.set(ERROR_CODE, error_name(error))
        rows.set(PAYLOAD_SIZE, end - body)
        pending, broke = self._pairing.response(
            ts_first, partial(fits, buf=buf, body=body, end=end, error=error)
        )
        if pending is not None:
            request_type = pending.type
            rows.set(ANSWERS, pending.name)
            parts: list[Part | None] = [None]
            if pending.parts is None:  # its time of sending is unknown: no latency
                rows.set(INFO, "answers a request lost in missing bytes")
            else:
                rows.set(REQUEST_TS, pending.ts)
                parts = list(pending.parts)
                describe_parts(rows, pending.parts, pending.type)
        else:
            request_type = guess_kind(buf, body, end, error)
            parts = [None]
        rows.set(COMMAND, REQUEST_NAMES[request_type] + "_RESPONSE")
        if pending is None:
            rows.set(INFO, "unpaired")
            if broke:
                self._conversation.frame_anomaly(
                    "protocol_violation",
                    rows,
                    "response does not fit the request it answers in order; pairing stops",
                )
            elif self._pairing.in_step:
                self._conversation.unmatched(rows, Direction.C2B)
        if request_type == OFFSETS:
            self._offsets(buf, body, end)
        elif request_type == MULTIFETCH:
            self._multifetch(buf, body, end, parts)
        else:
            budget = Budget(self._limit)
            found = read_message_set(buf, body, end, _fetch_offset(parts[0]), budget)
            self._emit_messages([(parts[0], found)])
            rows.set(TRUNCATED_TAIL, found.tail)
        rows.end_row()
        return True

    def _offsets(self, buf: bytes, body: int, end: int) -> None:
        offsets = read_offsets(buf, body, end)
        if offsets is None:
            self._conversation.frame_anomaly(
                "protocol_violation", self._rows, "OFFSETS answer is not an offset array"
            )
            return
        add_info(self._rows, f"offsets={offsets}")

    def _multifetch(self, buf: bytes, body: int, end: int, fetches: list[Part | None]) -> None:
        found = split_parts(buf, body, end)
        if found is None:
            self._conversation.frame_anomaly(
                "protocol_violation", self._rows, "MULTIFETCH answer does not split into parts"
            )
            return
        if len(fetches) != len(found):
            fetches = [None] * len(found)
        sets = []
        errors = []
        budget = Budget(self._limit)
        for index, ((error, start, stop), fetch) in enumerate(zip(found, fetches, strict=True)):
            if error:
                where = f"{fetch.topic}:{fetch.partition}" if fetch is not None else "?"
                errors.append(f"part {index} {where} {error_name(error)}")
            sets.append((fetch, read_message_set(buf, start, stop, _fetch_offset(fetch), budget)))
        if errors:
            add_info(self._rows, "; ".join(errors))
        self._emit_messages(sets)
        self._rows.set(TRUNCATED_TAIL, sum(message_set.tail for _, message_set in sets))

    def _emit_messages(self, sets: Sets) -> None:
        """The sets' message rows as they are walked, then the damage the walks met."""
        emit_messages(self._messages, self._rows, sets, self._payloads)
        for _, message_set in sets:
            for kind, detail in message_set.problems.all():
                self._conversation.frame_anomaly(kind, self._rows, detail)

    # -- pairing and anomalies -----------------------------------------------------------

    def _lose_pairing(self, label: int, ts: int, offset: int | None, why: str) -> None:
        if self._pairing.lose(ts if label else None):
            self._conversation.anomaly(
                label,
                ts,
                offset,
                None,
                None,
                "pairing_lost",
                f"{why}: responses carry no correlation id, so they are not paired with "
                "requests until one fits a request seen since",
            )

    def _stream_anomaly(
        self, label: int, kind: str, ts: int, offset: int, size: int, detail: str
    ) -> None:
        self._conversation.anomaly(label, ts, offset, size, None, kind, detail)
        if kind in ("resync", "bad_frame_header"):  # gaps: on_gap; skipped frames: _frame_lost
            self._lose_pairing(label, ts, offset, f"{kind} in {LABELS[label]}")

    def _frame_row(
        self, label: int, start: int, end: int, offset: int, ts_first: int, ts: int
    ) -> ColumnBuffer:
        """The columns every frame's row has, set in the row begun: its builder."""
        rows = self._rows
        rows.set(TS, ts)
        rows.set(CAPTURE, self._capture)
        rows.set(CONN_ID, self._conn_id)
        rows.set(DIRECTION, LABELS[label])
        rows.set(PROTOCOL, "kafka07")
        rows.set(TS_FIRST, ts_first)
        rows.set(STREAM_OFFSET, offset)
        rows.set(FRAME_SIZE, end - start)
        return rows


def _fetch_offset(part: Part | None) -> int | None:
    return part.value if part is not None else None
