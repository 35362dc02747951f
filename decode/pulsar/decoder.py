"""PulsarDecoder: one connection's Pulsar conversation into `frames`, `messages` and
`anomalies` rows (the :class:`pwcap.decode.api.ConnectionDecoder` contract)."""

from __future__ import annotations

from typing import Any

import cython
from google.protobuf.message import DecodeError

from ...capture.events import LABELS, ClientBy, Connection, Direction
from ...tables.schema import position
from ..api import DecodeOptions, FlipRoles, Row, RowSink
from ..wire import WireError, read_varint, text
from . import commands as c
from ._pb.pulsar_api_pb2 import AuthMethod, BaseCommand, KeySharedMode
from .framing import TYPE_TAG, PulsarFrames
from .holdback import HeldRows
from .sniff import looks_like_command
from .state import CONSUMER_NAMES, PRODUCER_NAMES, ROLE_CODES

if cython.compiled:  # C declarations (.pxd files): C calls
    from cython.cimports.pwcap.decode.conversation import Conversation
    from cython.cimports.pwcap.decode.framing import FrameHandler, FrameStream
    from cython.cimports.pwcap.decode.pulsar.hot import HotReader
    from cython.cimports.pwcap.decode.pulsar.messages import EntryDecoder
    from cython.cimports.pwcap.decode.pulsar.state import (
        ConnectionState,
        grant,
        merge_names,
        spend,
    )
    from cython.cimports.pwcap.tables.columns import ColumnBuffer
else:
    from ...tables.columns import ColumnBuffer
    from ..conversation import Conversation
    from ..framing import FrameHandler, FrameStream
    from .hot import HotReader
    from .messages import EntryDecoder
    from .state import ConnectionState, grant, merge_names, spend

# A command holding only its `type` (tag byte + one-byte varint: every type is < 128)
# cannot carry the command message its type names.
# (C constants when compiled: a module global is a dict lookup at every frame.)
BARE_COMMAND_SIZE = cython.declare(cython.Py_ssize_t, 2)
_parse_command = BaseCommand.FromString
_SPECS = c.SPECS
_PRODUCER_SUCCESS = cython.declare(cython.int, BaseCommand.PRODUCER_SUCCESS)
_CONNECT = BaseCommand.CONNECT
_NAME_COLUMNS = frozenset(PRODUCER_NAMES + CONSUMER_NAMES)
_FRAMES = PulsarFrames(looks_like_command)
# The `frames` columns this module sets or reads (C constants when compiled).
TS = cython.declare(cython.Py_ssize_t, position("frames", "ts"))
CAPTURE = cython.declare(cython.Py_ssize_t, position("frames", "capture"))
CONN_ID = cython.declare(cython.Py_ssize_t, position("frames", "conn_id"))
DIRECTION = cython.declare(cython.Py_ssize_t, position("frames", "direction"))
PROTOCOL = cython.declare(cython.Py_ssize_t, position("frames", "protocol"))
TS_FIRST = cython.declare(cython.Py_ssize_t, position("frames", "ts_first"))
STREAM_OFFSET = cython.declare(cython.Py_ssize_t, position("frames", "stream_offset"))
COMMAND = cython.declare(cython.Py_ssize_t, position("frames", "command"))
COMMAND_TYPE = cython.declare(cython.Py_ssize_t, position("frames", "command_type"))
FRAME_SIZE = cython.declare(cython.Py_ssize_t, position("frames", "frame_size"))
PAYLOAD_SIZE = cython.declare(cython.Py_ssize_t, position("frames", "payload_size"))
PRODUCER_ID = cython.declare(cython.Py_ssize_t, position("frames", "producer_id"))
CONSUMER_ID = cython.declare(cython.Py_ssize_t, position("frames", "consumer_id"))
PERMITS = cython.declare(cython.Py_ssize_t, position("frames", "permits"))
NUM_MESSAGES = cython.declare(cython.Py_ssize_t, position("frames", "num_messages"))
ACKED_IN_BATCH = cython.declare(cython.Py_ssize_t, position("frames", "acked_in_batch"))
ACK_SETS = cython.declare(cython.Py_ssize_t, position("frames", "ack_sets"))
KEY_SHARED_MODE = cython.declare(cython.Py_ssize_t, position("frames", "key_shared_mode"))
HASH_RANGES = cython.declare(cython.Py_ssize_t, position("frames", "hash_ranges"))
# The hash ranges of a SUBSCRIBE kept at most: a consumer's sticky ranges are few (the
# whole key space is 65,536 hashes); a frame may list millions, and no row holds them.
MAX_HASH_RANGES = 1024


@cython.cclass
class _Side(FrameHandler):
    """One direction of the conversation; ``label`` is 0 (c2b) or 1 (b2c). Its stream
    hands it each whole frame, for the decoder (compiled: C calls)."""

    label = cython.declare(cython.int, visibility="public")
    frames = cython.declare(cython.longlong, visibility="public")
    stream = cython.declare(FrameStream, visibility="public")
    kinds = cython.declare(dict, visibility="public")
    decoder = cython.declare(object)  # its PulsarDecoder (a class defined below)

    def __init__(self, label: int, decoder: Any) -> None:
        self.label = label
        self.frames = 0
        self.stream = None  # a FrameStream, set by the decoder
        self.kinds = _KINDS[label]  # command type -> how this side's frames decode
        self.decoder = decoder

    @cython.ccall
    @cython.locals(buf=bytes, start=cython.Py_ssize_t, end=cython.Py_ssize_t)
    @cython.locals(field=cython.longlong, offset=cython.longlong, ts_first=cython.longlong)
    @cython.locals(ts=cython.longlong)
    def frame(
        self,
        buf: bytes,
        start: int,
        end: int,
        field: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> None:
        return cython.cast(PulsarDecoder, self.decoder)._frame(
            self, buf, start, end, field, offset, ts_first, ts
        )


@cython.cclass
class _Kind:
    """Everything about one command type sent by one side that does not change per frame.

    Resolved once per process, on the type's first frame, and shared by every connection
    (nothing in it belongs to one), so the per-frame path does attribute reads (compiled:
    of C struct fields) instead of table lookups, and a connection costs no kinds.
    """

    spec = cython.declare(object, visibility="public")
    command = cython.declare(str, visibility="public")
    command_type = cython.declare(cython.int, visibility="public")
    direction = cython.declare(str, visibility="public")
    extract = cython.declare(object, visibility="public")
    pair_role = cython.declare(cython.int, visibility="public")  # ROLE_CODES; -1: none
    effect = cython.declare(object, visibility="public")
    needs_body = cython.declare(cython.bint, visibility="public")
    payload = cython.declare(cython.bint, visibility="public")
    delivery = cython.declare(cython.bint, visibility="public")
    named = cython.declare(cython.bint, visibility="public")
    id_column = cython.declare(cython.Py_ssize_t, visibility="public")

    def __init__(self, spec: c.CommandSpec, label: int) -> None:
        self.spec = spec
        self.command = spec.name
        self.command_type = spec.type
        self.direction = LABELS[label]
        self.extract = spec.extractor.copy
        self.pair_role = ROLE_CODES[spec.role] if spec.role is not None else -1
        self.effect = _EFFECTS.get(spec.name)
        self.needs_body = spec.needs_body
        self.payload = spec.name in c.PAYLOAD_COMMANDS
        self.delivery = spec.name == "MESSAGE"  # spends the consumer's permits
        # The row may hold name columns before the state's are merged in: its own, or
        # those a response takes over from its request.
        self.named = bool(spec.columns & _NAME_COLUMNS) or spec.role == c.RESPONSE
        # The column of the command's own producer or consumer id (-1: it has none), whose
        # names the connection's state keeps.
        self.id_column = -1
        if "producer_id" in spec.columns:
            self.id_column = PRODUCER_ID
        elif "consumer_id" in spec.columns:
            self.id_column = CONSUMER_ID


# Side label -> command type -> its _Kind, filled as types are first met. The kind of a
# CONNECT stays out of these (see PulsarDecoder._new_kind), in _CONNECT_KINDS.
_KINDS: tuple[dict[int, _Kind], dict[int, _Kind]] = ({}, {})
_CONNECT_KINDS: list[_Kind | None] = [None, None]


@cython.cclass
class PulsarDecoder:
    """Sans-IO decoder of one TCP connection carrying the Pulsar binary protocol.

    Directions follow the capture's :class:`Direction` until the content proves the
    roles reversed (the first command with a definite sender comes from the wrong side,
    possible only when reassembly did not see the SYN): the decoder then says so once
    (``flip_roles``; the capture layer labels later bytes by the new roles) and swaps its
    two stream states to agree. Until that first telling command, rows wait in
    :class:`HeldRows` and leave with their directions corrected, so no row contradicts
    the final roles.
    """

    protocol = "pulsar"
    # Compiled, its attributes are C fields: each frame reads several of them.
    _flip_roles = cython.declare(object)
    _out = cython.declare(object)
    _held = cython.declare(object)
    _rows = cython.declare(ColumnBuffer)  # where frame rows are built
    _capture = cython.declare(object)
    _conn_id = cython.declare(object)
    _roles_settled = cython.declare(cython.bint)
    _state = cython.declare(ConnectionState)
    _producers = cython.declare(dict)  # the state's (producer id -> names behind it)
    _consumers = cython.declare(dict)  # the state's (consumer id -> names, permits)
    _conversation = cython.declare(Conversation)
    _emit_anomaly = cython.declare(object)
    _entries = cython.declare(EntryDecoder)
    _hot = cython.declare(HotReader)
    _fields = cython.declare(dict)
    _sides = cython.declare(list)

    def __init__(
        self, conn: Connection, sink: RowSink, options: DecodeOptions, flip_roles: FlipRoles
    ) -> None:
        self._flip_roles = flip_roles
        in_sync = conn.client_by == ClientBy.SYN
        self._out = sink
        # Rows wait until the content confirms which end is the client (see the class doc).
        self._held = None if in_sync else HeldRows()
        building: RowSink = sink if self._held is None else self._held.sink
        self._rows = building.frames
        self._capture = options.capture
        self._conn_id = conn.conn_id
        self._roles_settled = in_sync
        self._state = ConnectionState(complete=in_sync)
        self._producers = self._state.producers
        self._consumers = self._state.consumers
        self._conversation = Conversation(
            building, options.capture, conn.conn_id, self.protocol, "no matching request was seen"
        )
        # (side label, ts, offset, size, command, kind, detail): an anomaly of a side
        self._emit_anomaly = self._conversation.anomaly
        self._entries = EntryDecoder(building, options, self._conversation.frame_anomaly)
        self._hot = HotReader()
        self._fields: Row = {}
        self._sides = [_Side(0, self), _Side(1, self)]
        for side in self._sides:
            side.stream = FrameStream(
                _FRAMES,
                side,
                self._stream_anomaly(side),
                options.max_frame_size,
                in_sync,
                budget=options.frames,
            )

    # -- ConnectionDecoder ---------------------------------------------------------------

    @cython.locals(side=_Side)
    def on_data(self, direction: Direction, ts: int, offset: int, data: bytes) -> None:
        side = self._sides[direction]
        self._conversation.on_data(side.label, ts)
        side.stream.feed(ts, offset, data)

    def on_gap(self, direction: Direction, ts: int, offset: int, size: int) -> None:
        side = self._sides[direction]
        self._conversation.on_gap(side.label)
        self._state.lose_sync()
        side.stream.on_gap(ts, offset, size)

    @cython.locals(side=_Side)
    def on_close(self, ts: int) -> None:
        for side in self._sides:
            side.stream.on_close(ts)
        self._conversation.on_close()
        if not self._roles_settled:
            self._release_rows(swapped=False)
        # A side and its stream refer to each other and to this decoder: without them the
        # closed connection is freed by reference counting now, not by the cyclic
        # collector some time later (tens of thousands of connections close at once).
        for side in self._sides:
            side.stream = None
            side.decoder = None

    def connection_fields(self) -> Row:
        fields = dict(self._fields)
        fields["frames_c2b"] = self._sides[0].frames
        fields["frames_b2c"] = self._sides[1].frames
        fields["anomalies"] = self._conversation.anomalies
        return fields

    # -- frames --------------------------------------------------------------------------

    @cython.cfunc
    @cython.locals(side=_Side, kind=_Kind, rows=ColumnBuffer, start=cython.Py_ssize_t)
    @cython.locals(state=ConnectionState, paired=cython.bint)
    @cython.locals(end=cython.Py_ssize_t, size=cython.longlong, offset=cython.longlong)
    @cython.locals(ts_first=cython.longlong, ts=cython.longlong, buf=bytes)
    @cython.locals(id_column=cython.Py_ssize_t, holders=dict)
    def _frame(
        self,
        side: _Side,
        buf: bytes,
        start: int,
        end: int,
        size: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> None:
        """One whole frame, ``buf[start:end]``; nothing in it may stop the decoder."""
        try:
            command_end = start + 8 + size
            rows = self._rows
            command = None
            # Until the roles are settled a frame may send the rows built so far elsewhere
            # (see _settle_from): the general path reads it, building its row after that.
            type_number = -1
            if self._roles_settled:
                type_number = self._hot.command(buf, start + 8, command_end)
            if type_number >= 0:  # a hot command: its columns go straight into the row
                kind = side.kinds.get(type_number)
                if kind is None:
                    kind = self._new_kind(side, _SPECS[type_number])
                if not self._hot.columns(rows):
                    rows.discard_row()  # the general path reads it, into a row of its own
                    type_number = -1
            if type_number < 0:
                try:
                    command = _parse_command(buf[start + 8 : command_end])
                except DecodeError as exc:
                    self._emit_anomaly(
                        side.label, ts, offset, end - start, None, "bad_protobuf", str(exc)
                    )
                    return
                type_number = command.type
                kind = side.kinds.get(type_number)
                if kind is None:
                    kind = self._kind(
                        side, command, type_number, buf, start, end, offset, ts_first, ts
                    )
                    if kind is None:
                        return
            if size == BARE_COMMAND_SIZE and kind.needs_body:
                self._bodiless(side, kind.spec, end - start, offset, ts_first, ts)
                return
            if not self._roles_settled:
                self._settle_from(side, kind.spec)
                kind = self._new_kind(side, kind.spec)  # the direction may have changed
                rows = self._rows
            side.frames += 1
            self._begin(
                kind.direction, kind.command, kind.command_type, end - start, offset, ts_first, ts
            )
            sub = None  # a hot command has no message object: its columns are read already
            if command is not None:
                sub = kind.extract(command, rows, buf, start + 8, command_end)
            state = self._state
            paired = kind.pair_role >= 0
            if paired:
                # A PRODUCER_SUCCESS with producer_ready false is followed by another.
                final = kind.command_type != _PRODUCER_SUCCESS or sub.producer_ready
                if not state.pair(kind.pair_role, rows, side.label, final) and state.complete:
                    self._suspect_unmatched(rows, side.label)
            effect = kind.effect
            if effect is not None:
                effect(self, sub, rows)
            id_column = kind.id_column
            if id_column >= 0:  # the names behind the command's producer / consumer id
                holders = self._producers if id_column == PRODUCER_ID else self._consumers
                holder = holders.get(rows.get(id_column))
                if holder is not None:
                    merge_names(rows, holder.names, kind.named)
            elif paired:  # a response: the ids it took over from its request
                state.fill_names(rows, True)
            if command_end < end:
                if kind.payload:
                    if kind.delivery and sub is not None and len(sub.ack_set):
                        words = list(sub.ack_set)
                        self._entries.deliver_only(words)
                        for word, bits in enumerate(words[: c.MAX_ACK_SET_WORDS]):  # own id: 0
                            rows.add_struct(ACK_SETS, 0, word, bits, 0, 0)
                    self._entries.decode(rows, kind.delivery, buf, command_end, end, side.label)
                else:
                    rows.set_int(PAYLOAD_SIZE, end - command_end)
            if kind.delivery:
                self._spend_permits(rows)
            rows.end_row()
        except Exception as exc:  # a frame may be damaged in any way: report, go on
            self._discard_rows()
            self._emit_anomaly(side.label, ts, offset, end - start, None, "decode_error", repr(exc))

    @cython.cfunc
    def _begin(
        self,
        direction: str,
        command: object,
        command_type: object,
        size: cython.longlong,
        offset: cython.longlong,
        ts_first: cython.longlong,
        ts: cython.longlong,
    ) -> cython.void:
        """The columns every frame's row has."""
        rows: ColumnBuffer = self._rows
        rows.set_int(TS, ts)
        rows.set_text(CAPTURE, self._capture)
        rows.set_int(CONN_ID, self._conn_id)
        rows.set_text(DIRECTION, direction)
        rows.set_text(PROTOCOL, "pulsar")
        rows.set(COMMAND, command)
        rows.set(COMMAND_TYPE, command_type)
        rows.set_int(TS_FIRST, ts_first)
        rows.set_int(STREAM_OFFSET, offset)
        rows.set_int(FRAME_SIZE, size)

    @cython.cfunc
    def _discard_rows(self) -> cython.void:
        """Forget the rows a damaged frame left half built."""
        self._rows.discard_row()
        self._entries.messages.discard_row()
        self._conversation.rows.discard_row()

    def _kind(
        self,
        side: _Side,
        command: Any,
        type_number: int,
        buf: bytes,
        start: int,
        end: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> _Kind | None:
        """First frame of a type on this side, parsed: its kind, or None once reported as
        unknown."""
        spec = _SPECS.get(type_number)
        if spec is None or (type_number == _CONNECT and not command.HasField("type")):
            self._unknown(side, buf, start, end, offset, ts_first, ts)
            return None
        return self._new_kind(side, spec)

    def _new_kind(self, side: _Side, spec: c.CommandSpec) -> _Kind:
        """The kind of ``spec``'s frames on ``side``, made once. A CONNECT's is kept out
        of the side's table: its type number is also what a command without any type
        reads as, so the general path checks each one."""
        label = side.label
        if spec.type == _CONNECT:
            kind = _CONNECT_KINDS[label]
            if kind is None:
                kind = _CONNECT_KINDS[label] = _Kind(spec, label)
            return kind
        kind = _KINDS[label].get(spec.type)
        if kind is None:
            kind = _KINDS[label][spec.type] = _Kind(spec, label)
        return kind

    def _unknown(
        self, side: _Side, buf: bytes, start: int, end: int, offset: int, ts_first: int, ts: int
    ) -> None:
        type_number = _raw_type(buf, start + 8)
        self._bare_row(side, None, type_number, end - start, offset, ts_first, ts)
        self._conversation.frame_anomaly(
            "unknown_command", self._rows, f"command type {type_number} is not known"
        )
        self._rows.end_row()

    def _bodiless(
        self, side: _Side, spec: c.CommandSpec, size: int, offset: int, ts_first: int, ts: int
    ) -> None:
        """A known type without its command message: a row, but no made-up field values."""
        self._bare_row(side, spec.name, spec.type, size, offset, ts_first, ts)
        self._conversation.frame_anomaly(
            "bad_protobuf", self._rows, f"{spec.name} without its `{spec.field}` field"
        )
        self._rows.end_row()

    def _bare_row(
        self,
        side: _Side,
        name: str | None,
        type_number: int | None,
        size: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> None:
        side.frames += 1
        self._begin(LABELS[side.label], name, type_number, size, offset, ts_first, ts)

    def _settle_from(self, side: _Side, spec: c.CommandSpec) -> None:
        """Settle the roles on a command only one side sends; give up when too long."""
        if spec.sender != c.EITHER:
            self._settle_roles(side, spec.sender)
        elif self._held is not None and self._held.full():
            self._release_rows(swapped=False)

    def _settle_roles(self, side: _Side, sender: str) -> None:
        """Swap client and server once if the first telling command came the wrong way."""
        if (sender == c.CLIENT) == (side.label == 0):
            self._release_rows(swapped=False)
            return
        self._flip_roles()
        first, second = self._sides
        first.label, second.label = 1, 0
        self._sides = [second, first]
        first.kinds = _KINDS[1]  # the kinds of their new directions
        second.kinds = _KINDS[0]
        self._state.swap_directions()
        self._release_rows(swapped=True)

    def _release_rows(self, swapped: bool) -> None:
        """Roles settled (or given up on): the held rows go out, later rows go straight."""
        self._roles_settled = True
        self._rows = self._out.frames
        self._entries.use(self._out)
        self._conversation.rows = self._out.anomalies
        if self._held is not None:
            self._held.release(self._out, swapped)
            self._held = None

    # -- state effects of particular commands --------------------------------------------

    def _on_connect(self, sub: Any, rows: ColumnBuffer) -> None:
        fields = self._fields
        fields["client_version"] = text(sub.client_version)
        if sub.HasField("protocol_version"):
            fields.setdefault("protocol_version", sub.protocol_version)
        if sub.HasField("auth_method_name"):
            fields["auth_method"] = text(sub.auth_method_name)
        elif sub.HasField("auth_method"):
            method = AuthMethod.DESCRIPTOR.values_by_number.get(sub.auth_method)
            fields["auth_method"] = method.name if method else str(sub.auth_method)
        if sub.HasField("auth_data"):
            fields["auth_data_size"] = len(sub.auth_data)

    def _on_connected(self, sub: Any, rows: ColumnBuffer) -> None:
        self._fields["server_version"] = text(sub.server_version)
        if sub.HasField("protocol_version"):
            self._fields["protocol_version"] = sub.protocol_version

    def _on_producer(self, sub: Any, rows: ColumnBuffer) -> None:
        self._state.add_producer(rows)

    def _on_producer_success(self, sub: Any, rows: ColumnBuffer) -> None:
        # The broker-chosen name belongs to the producer of the PRODUCER request answered.
        producer = self._state.producers.get(rows.get(PRODUCER_ID))
        if producer is not None:
            producer.rename(text(sub.producer_name))

    def _on_subscribe(self, sub: Any, rows: ColumnBuffer) -> None:
        self._state.add_consumer(rows)
        if sub.HasField("keySharedMeta"):
            meta = sub.keySharedMeta
            mode = KeySharedMode.DESCRIPTOR.values_by_number.get(meta.keySharedMode)
            rows.set(KEY_SHARED_MODE, mode.name if mode else str(meta.keySharedMode))
            for kept in meta.hashRanges[:MAX_HASH_RANGES]:
                rows.add_struct(HASH_RANGES, kept.start, kept.end, 0, 0, 0)

    def _on_flow(self, sub: Any, rows: ColumnBuffer) -> None:
        grant(self._consumers, rows.get(CONSUMER_ID), rows.get(PERMITS))

    @cython.cfunc
    def _spend_permits(self, rows: ColumnBuffer) -> None:
        consumer_id = rows.get(CONSUMER_ID)
        # The broker spends no permit on the batch indexes the ack_set says were acked.
        delivered = (rows.get(NUM_MESSAGES) or 1) - (rows.get(ACKED_IN_BATCH) or 0)
        before = spend(self._consumers, consumer_id, delivered)
        if before is not None and before <= 0:
            self._conversation.frame_anomaly(
                "protocol_violation",
                rows,
                f"MESSAGE delivered with {before} permits left for consumer {consumer_id}",
            )

    # -- anomalies -----------------------------------------------------------------------

    def _suspect_unmatched(self, rows: ColumnBuffer, label: int) -> None:
        """A response without its request, which the other side would have sent."""
        self._conversation.unmatched(rows, 1 - label)

    def _stream_anomaly(self, side: _Side) -> Any:
        def report(kind: str, ts: int, offset: int, size: int, detail: str) -> None:
            if kind == "resync":
                self._state.lose_sync()
            self._emit_anomaly(side.label, ts, offset, size, None, kind, detail)

        return report


_EFFECTS = {
    "CONNECT": PulsarDecoder._on_connect,
    "CONNECTED": PulsarDecoder._on_connected,
    "PRODUCER": PulsarDecoder._on_producer,
    "SUBSCRIBE": PulsarDecoder._on_subscribe,
    "FLOW": PulsarDecoder._on_flow,
    "PRODUCER_SUCCESS": PulsarDecoder._on_producer_success,
}


def _raw_type(buf: bytes, pos: int) -> int | None:
    """The type number of a command whose type the schema does not know (its `type`
    field, first)."""
    if not buf.startswith(TYPE_TAG, pos):
        return None
    try:
        value = read_varint(buf, pos + len(TYPE_TAG), len(buf))[0]
    except WireError:
        return None
    return value if value < 1 << 31 else None
