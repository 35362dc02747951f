"""PulsarDecoder: one connection's Pulsar conversation into `frames`, `messages` and
`anomalies` rows (the :class:`pwcap.decode.api.ConnectionDecoder` contract)."""

from __future__ import annotations

from functools import partial
from typing import Any

import cython
from google.protobuf.message import DecodeError
from pwcap.capture.events import LABELS, ClientBy, Connection, Direction
from pwcap.decode.api import DecodeOptions, FlipRoles, Row, RowSink
from pwcap.decode.conversation import Conversation
from pwcap.decode.framing import FrameStream
from pwcap.decode.pulsar import commands as c
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import AuthMethod, BaseCommand
from pwcap.decode.pulsar.framing import PulsarFrames
from pwcap.decode.pulsar.holdback import HeldRows
from pwcap.decode.pulsar.messages import EntryDecoder
from pwcap.decode.pulsar.sniff import looks_like_command
from pwcap.decode.pulsar.state import CONSUMER_NAMES, PRODUCER_NAMES, ConnectionState, Pairer
from pwcap.decode.wire import WireError, read_varint, text

if cython.compiled:  # the hot reader's C declarations (hot.pxd): its methods are C calls
    from cython.cimports.pwcap.decode.pulsar.hot import HotReader
else:
    from pwcap.decode.pulsar.hot import HotReader

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


@cython.cclass
class _Side:
    """One direction of the conversation; ``label`` is 0 (c2b) or 1 (b2c)."""

    label = cython.declare(cython.int, visibility="public")
    frames = cython.declare(cython.longlong, visibility="public")
    stream = cython.declare(object, visibility="public")
    kinds = cython.declare(dict, visibility="public")

    def __init__(self, label: int) -> None:
        self.label = label
        self.frames = 0
        self.stream = None  # a FrameStream, set by the decoder
        self.kinds = {}  # command type -> how this side's frames decode (a _Kind)


@cython.cclass
class _Kind:
    """Everything about one command type on one side that does not change per frame.

    Resolved once, on the type's first frame, so the per-frame path does attribute
    reads (compiled: of C struct fields) instead of table lookups, and copies a ready
    row template.
    """

    spec = cython.declare(object, visibility="public")
    template = cython.declare(dict, visibility="public")
    extract = cython.declare(object, visibility="public")
    pair = cython.declare(object, visibility="public")
    effect = cython.declare(object, visibility="public")
    needs_body = cython.declare(cython.bint, visibility="public")
    payload = cython.declare(cython.bint, visibility="public")
    delivery = cython.declare(cython.bint, visibility="public")
    named = cython.declare(cython.bint, visibility="public")
    id_column = cython.declare(str, visibility="public")
    holders = cython.declare(dict, visibility="public")
    messages = cython.declare(dict, visibility="public")

    def __init__(
        self, spec: c.CommandSpec, template: Row, pair: Pairer | None, effect: Any
    ) -> None:
        self.spec = spec
        self.template = template
        self.extract = spec.extract
        self.pair = pair
        self.effect = effect
        self.needs_body = spec.needs_body
        self.payload = spec.name in c.PAYLOAD_COMMANDS
        self.delivery = spec.name == "MESSAGE"  # spends the consumer's permits
        # The row may hold name columns before the state's are merged in: its own, or
        # those a response takes over from its request.
        self.named = bool(spec.columns & _NAME_COLUMNS) or spec.role == c.RESPONSE
        # Where the names behind the command's own producer / consumer id are kept.
        self.id_column = ""
        self.holders = None  # producer or consumer id -> its names, when the command has one
        self.messages = None  # the `messages` row template of a payload command's entries


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
    _sink = cython.declare(object)
    _capture = cython.declare(object)
    _conn_id = cython.declare(object)
    _roles_settled = cython.declare(cython.bint)
    _state = cython.declare(object)
    _conversation = cython.declare(object)
    _emit_anomaly = cython.declare(object)
    _entries = cython.declare(object)
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
        self._sink: RowSink = sink if self._held is None else self._held
        self._capture = options.capture
        self._conn_id = conn.conn_id
        self._roles_settled = in_sync
        self._state = ConnectionState(complete=in_sync)
        self._conversation = Conversation(
            self._sink, options.capture, conn.conn_id, self.protocol, "no matching request was seen"
        )
        # (side label, ts, offset, size, command, kind, detail): an anomaly of a side
        self._emit_anomaly = self._conversation.anomaly
        self._entries = EntryDecoder(self._sink, options, self._conversation.frame_anomaly)
        self._hot = HotReader()
        self._fields: Row = {}
        self._sides = [_Side(0), _Side(1)]
        for side in self._sides:
            side.stream = FrameStream(
                _FRAMES,
                partial(self._frame, side),
                self._stream_anomaly(side),
                options.max_frame_size,
                in_sync,
                budget=options.frames,
            )

    # -- ConnectionDecoder ---------------------------------------------------------------

    def on_data(self, direction: Direction, ts: int, offset: int, data: bytes) -> None:
        side = self._sides[direction]
        self._conversation.on_data(side.label, ts)
        side.stream.feed(ts, offset, data)

    def on_gap(self, direction: Direction, ts: int, offset: int, size: int) -> None:
        side = self._sides[direction]
        self._conversation.on_gap(side.label)
        self._state.lose_sync()
        side.stream.on_gap(ts, offset, size)

    def on_close(self, ts: int) -> None:
        for side in self._sides:
            side.stream.on_close(ts)
        self._conversation.on_close()
        if not self._roles_settled:
            self._release_rows(swapped=False)

    def connection_fields(self) -> Row:
        fields = dict(self._fields)
        fields["frames_c2b"] = self._sides[0].frames
        fields["frames_b2c"] = self._sides[1].frames
        fields["anomalies"] = self._conversation.anomalies
        return fields

    # -- frames --------------------------------------------------------------------------

    @cython.locals(side=_Side, kind=_Kind)
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
            hot = self._hot
            row = None
            type_number = hot.command(buf, start + 8, command_end)
            if type_number >= 0:  # a hot command: its columns go straight into the row
                kind = side.kinds.get(type_number)
                if kind is None:
                    kind = self._new_kind(side, _SPECS[type_number])
                row = kind.template.copy()
                if not hot.columns(row):
                    row = None  # the general path reads it, into a row of its own
            if row is None:
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
            else:
                command = None
            if size == BARE_COMMAND_SIZE and kind.needs_body:
                self._bodiless(side, kind.spec, end - start, offset, ts_first, ts)
                return
            if not self._roles_settled:
                self._settle_from(side, kind.spec)
                kind = self._new_kind(side, kind.spec)  # the direction may have changed
                if row is not None:  # a hot command's, made from the previous template
                    row["direction"] = kind.template["direction"]
            side.frames += 1
            if row is None:
                row = kind.template.copy()
                sub = kind.extract(command, row)
            else:  # a hot command: no message object, its columns are read already
                sub = None
            row["ts"] = ts
            row["ts_first"] = ts_first
            row["stream_offset"] = offset
            row["frame_size"] = end - start
            state = self._state
            pair = kind.pair
            if pair is not None:
                # A PRODUCER_SUCCESS with producer_ready false is followed by another.
                final = kind.spec.type != _PRODUCER_SUCCESS or sub.producer_ready
                if not pair(row, side.label, final) and state.complete:
                    self._suspect_unmatched(row, side.label)
            effect = kind.effect
            if effect is not None:
                effect(self, sub, row)
            holders = kind.holders
            if holders is not None:  # the names behind the command's producer / consumer id
                holder = holders.get(row[kind.id_column])
                if holder is not None:
                    if kind.named:
                        for column, value in holder.names.items():
                            row.setdefault(column, value)
                    else:
                        row.update(holder.names)
            elif pair is not None:  # a response: the ids it took over from its request
                state.fill_names(row, True)
            if command_end < end:
                if kind.payload:
                    self._entries.decode(row, kind.messages, buf, command_end, end, side.label)
                else:
                    row["payload_size"] = end - command_end
            if kind.delivery:
                self._spend_permits(row)
            self._sink.frame(row)
        except Exception as exc:  # a frame may be damaged in any way: report, go on
            self._emit_anomaly(side.label, ts, offset, end - start, None, "decode_error", repr(exc))

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
        """First frame of a type on this side: its kind, or None once reported as unknown.
        ``command`` is None for a hot command, read without a message object."""
        spec = _SPECS.get(type_number)
        if spec is None or (type_number == _CONNECT and not command.HasField("type")):
            self._unknown(side, buf, start, end, offset, ts_first, ts)
            return None
        return self._new_kind(side, spec)

    def _new_kind(self, side: _Side, spec: c.CommandSpec) -> _Kind:
        """The kind of ``spec``'s frames on ``side``, cached (but for CONNECT, whose type
        number is also what a command without any type reads as, so it is checked each
        time)."""
        template = {
            "capture": self._capture,
            "conn_id": self._conn_id,
            "direction": LABELS[side.label],
            "protocol": "pulsar",
            "command": spec.name,
            "command_type": spec.type,
            # Every frame sets these: present in the copy, they are replaced, not added.
            "ts": None,
            "ts_first": None,
            "stream_offset": None,
            "frame_size": None,
        }
        # As are the columns of the command's required fields (both paths write them
        # before the row is read). With them the template outgrows its first table, and
        # a copy has room for the columns a frame adds without a resize on the way.
        for column in spec.always:
            template[column] = None
        state = self._state
        pair = state.pairers[spec.role] if spec.role is not None else None
        kind = _Kind(spec, template, pair, _EFFECTS.get(spec.name))
        if "producer_id" in spec.columns:
            kind.id_column, kind.holders = "producer_id", state.producers
        elif "consumer_id" in spec.columns:
            kind.id_column, kind.holders = "consumer_id", state.consumers
        if kind.payload:
            kind.messages = self._entries.template(template)
        if spec.type != _CONNECT:
            side.kinds[spec.type] = kind
        return kind

    def _unknown(
        self, side: _Side, buf: bytes, start: int, end: int, offset: int, ts_first: int, ts: int
    ) -> None:
        type_number = _raw_type(buf, start + 8)
        row = self._bare_row(side, None, type_number, end - start, offset, ts_first, ts)
        self._conversation.frame_anomaly(
            "unknown_command", row, f"command type {type_number} is not known"
        )
        self._sink.frame(row)

    def _bodiless(
        self, side: _Side, spec: c.CommandSpec, size: int, offset: int, ts_first: int, ts: int
    ) -> None:
        """A known type without its command message: a row, but no made-up field values."""
        row = self._bare_row(side, spec.name, spec.type, size, offset, ts_first, ts)
        self._conversation.frame_anomaly(
            "bad_protobuf", row, f"{spec.name} without its `{spec.field}` field"
        )
        self._sink.frame(row)

    def _bare_row(
        self,
        side: _Side,
        name: str | None,
        type_number: int | None,
        size: int,
        offset: int,
        ts_first: int,
        ts: int,
    ) -> Row:
        side.frames += 1
        return {
            "ts": ts,
            "capture": self._capture,
            "conn_id": self._conn_id,
            "direction": LABELS[side.label],
            "protocol": "pulsar",
            "ts_first": ts_first,
            "stream_offset": offset,
            "command": name,
            "command_type": type_number,
            "frame_size": size,
        }

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
        first.kinds.clear()  # their row templates name the old directions
        second.kinds.clear()
        self._state.swap_directions()
        self._release_rows(swapped=True)

    def _release_rows(self, swapped: bool) -> None:
        """Roles settled (or given up on): the held rows go out, later rows go straight."""
        self._roles_settled = True
        self._sink = self._entries.sink = self._conversation.sink = self._out
        if self._held is not None:
            self._held.release(self._out, swapped)
            self._held = None

    # -- state effects of particular commands --------------------------------------------

    def _on_connect(self, sub: Any, row: Row) -> None:
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

    def _on_connected(self, sub: Any, row: Row) -> None:
        self._fields["server_version"] = text(sub.server_version)
        if sub.HasField("protocol_version"):
            self._fields["protocol_version"] = sub.protocol_version

    def _on_producer(self, sub: Any, row: Row) -> None:
        self._state.add_producer(row)

    def _on_producer_success(self, sub: Any, row: Row) -> None:
        # The broker-chosen name belongs to the producer of the PRODUCER request answered.
        producer = self._state.producers.get(row.get("producer_id"))
        if producer is not None:
            producer.rename(text(sub.producer_name))

    def _on_subscribe(self, sub: Any, row: Row) -> None:
        self._state.add_consumer(row)

    def _on_flow(self, sub: Any, row: Row) -> None:
        self._state.grant(row["consumer_id"], row["permits"])

    @cython.cfunc
    @cython.locals(row=dict)
    def _spend_permits(self, row: Row) -> None:
        before = self._state.spend(row["consumer_id"], row.get("num_messages") or 1)
        if before is not None and before <= 0:
            self._conversation.frame_anomaly(
                "protocol_violation",
                row,
                f"MESSAGE delivered with {before} permits left for consumer {row['consumer_id']}",
            )

    # -- anomalies -----------------------------------------------------------------------

    def _suspect_unmatched(self, row: Row, label: int) -> None:
        """A response without its request, which the other side would have sent."""
        self._conversation.unmatched(row, 1 - label)

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
    """The type number of a command whose type the schema does not know (field 1)."""
    if pos >= len(buf) or buf[pos] != 0x08:
        return None
    try:
        value = read_varint(buf, pos + 1, len(buf))[0]
    except WireError:
        return None
    return value if value < 1 << 31 else None
