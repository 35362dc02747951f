# cython: annotation_typing=True, initializedcheck=False
# (initializedcheck: the constructor sets every memoryview of the storage, before any row.)
"""The row builder of one table: rows set column by column, held in the layout Arrow
reads, handed to Arrow as ready-made buffers. This module is the row API; each kind of
column keeps its values in a storage of its own.

Decoders build their rows here directly (:class:`pwcap.decode.api.RowSink`): a column is
named by its position in its table (:func:`pwcap.tables.schema.position`, resolved once),
its value set with a typed setter (:meth:`ColumnBuffer.set_int`, :meth:`set_text`) or
the generic :meth:`set`, and :meth:`end_row` ends the row. No dict per row, no walk over
its items: a value goes straight to where its column keeps it, as the row is built:

- integers, timestamps and booleans into one 64-bit slot per row of their column, with
  a validity byte beside it (:mod:`.slots`);
- strings and binaries as their bytes, appended to the column's data, with the end
  offset of each row beside them (Arrow's offsets buffer, filled as rows arrive:
  :mod:`.texts`);
- a map of strings (message properties) as its keys' and values' bytes end to end,
  with their end offsets and each row's (copied from the bytes a reader found them in:
  :meth:`ColumnBuffer.set_pairs`), and a list of integer structs (message ids) as a
  64-bit slot per element and field (:meth:`ColumnBuffer.add_struct`): :mod:`.nested`.

A batch then becomes Arrow arrays without a conversion per value (:mod:`.arrow_copy`;
compiled: a copy of each column's bytes made in C, the storage kept for the next batch;
interpreted: views of it), and a column no row set costs nothing per row, which suits
tables of 40-odd columns of which a row sets a dozen. Rows that are rare (connections,
most anomalies) may come whole as a dict (:meth:`add`); the row being built can be read
back (:meth:`get`) and taken out as a dict (:meth:`take_row`) for the decoders' few uses
of that. A table's command or kind can be counted as rows end (:meth:`ColumnBuffer.tally`,
:mod:`.tally`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import cython
import pyarrow as pa

from .nested import list_storage
from .schema import Row, arrow_schema
from .schema import position as schema_position

if cython.compiled:  # the storages' C declarations (slots.pxd, ...): their methods are C calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.pwcap.tables.nested import IntStructs, ListRows, TextMap, whole_spans
    from cython.cimports.pwcap.tables.slots import SlotColumns
    from cython.cimports.pwcap.tables.tally import Tally
    from cython.cimports.pwcap.tables.texts import TextColumns
else:
    from .nested import IntStructs, ListRows, TextMap, whole_spans
    from .slots import SlotColumns
    from .tally import Tally
    from .texts import TextColumns

# How a column keeps its values: the low two bits of its place (the rest: its index
# among the columns kept that way).
# (C constants when compiled: a Python object here would be looked up and compared as one
# for every value set.)
SLOT = cython.declare(cython.Py_ssize_t, 0)
STRING = cython.declare(cython.Py_ssize_t, 1)
BINARY = cython.declare(cython.Py_ssize_t, 2)
NESTED = cython.declare(cython.Py_ssize_t, 3)


def _storage(kind: pa.DataType) -> int:
    if pa.types.is_boolean(kind) or pa.types.is_integer(kind) or pa.types.is_timestamp(kind):
        return SLOT
    if kind == pa.string():
        return STRING
    if kind == pa.binary():
        return BINARY
    return NESTED


@cython.cclass  # final (columns.pxd): its C methods are called directly, not via a vtable
class ColumnBuffer:
    """The pending rows of one table, and the row being built.

    ``on_full`` (the owner's conversion: it takes the batch) is called by the
    :meth:`end_row` that completes a batch's worth: ``limit`` rows, or fewer once their
    string and binary values add up to ``byte_limit`` (0 for none), so large values (kept
    payloads, long names) cannot pile up in memory.
    """

    def __init__(
        self,
        schema: pa.Schema,
        limit: int,
        byte_limit: int = 0,
        on_full: Callable[[], None] | None = None,
    ) -> None:
        self.schema = schema
        self._limit = max(1, limit)
        self._byte_limit = byte_limit
        self._on_full = on_full
        self._names = {sys.intern(field.name): at for at, field in enumerate(schema)}
        self._columns = [field.name for field in schema]
        self._booleans = frozenset(
            at for at, field in enumerate(schema) if pa.types.is_boolean(field.type)
        )
        by_storage: list[list[int]] = [[], [], [], []]
        for position, field in enumerate(schema):
            by_storage[_storage(field.type)].append(position)
        strings = len(by_storage[STRING])
        # Strings and binaries share one index space: text index = place >> 2 for both.
        texts = by_storage[STRING] + by_storage[BINARY]
        self._positions = [by_storage[SLOT], texts, by_storage[NESTED]]
        self._place = memoryview(bytearray(8 * len(schema))).cast("q")
        for storage, positions in ((SLOT, by_storage[SLOT]), (NESTED, by_storage[NESTED])):
            for index, position in enumerate(positions):
                self._place[position] = index << 2 | storage
        for index, position in enumerate(texts):
            self._place[position] = index << 2 | (STRING if index < strings else BINARY)
        self._strings = strings
        self._tallied_column = -1
        self._tally_value = None
        self._tally = Tally()
        self._reset()

    def _reset(self) -> None:
        """Empty the buffer, with fresh storage for a batch: the Arrow arrays of the last
        one may still be using the old."""
        capacity = self._limit
        slots, texts, nested = self._positions
        self._slots = SlotColumns(len(slots), capacity)
        self._texts = TextColumns([self._columns[p] for p in texts], self._strings, capacity)
        self._lists = [list_storage(self.schema.field(p), capacity) for p in nested]
        self.count = 0
        self.held_bytes = 0

    def __len__(self) -> int:
        return self.count

    # -- the row being built ---------------------------------------------------------------

    @cython.cfunc
    @cython.exceptval(-1, check=True)
    def _index(self, column: cython.Py_ssize_t, storage: cython.Py_ssize_t) -> cython.Py_ssize_t:
        """Where column ``column`` keeps its values, checked to be kept as ``storage``
        (text: either kind) in a buffer with room for the row."""
        code: cython.Py_ssize_t = self._place[column]
        kept: cython.Py_ssize_t = code & 3
        if kept != storage and not (storage == STRING and kept == BINARY):
            raise TypeError(f"{self._columns[column]}: not a column of that type")
        if self.count >= self._limit:
            raise OverflowError("a full ColumnBuffer takes no row before take_batch()")
        return code >> 2

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_int(self, column: cython.Py_ssize_t, value: cython.longlong) -> cython.int:
        """An integer, timestamp (microseconds) or boolean (0 or 1) column's value.
        (The setters return 0, compiled; -1 is a raised error.)"""
        self._slots.put(self._index(column, SLOT), self.count, value)
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_text(self, column: cython.Py_ssize_t, value: str) -> cython.int:
        """A string column's value."""
        return self._add_text(self._index(column, STRING), column, value)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def set_utf8(
        self,
        column: cython.Py_ssize_t,
        source: cython.p_const_char,
        size: cython.Py_ssize_t,
        encoded: object,
    ) -> cython.int:
        """A string column's value given as its UTF-8 (compiled: the ``size`` bytes at
        ``source``, written where the column keeps them with no str made; interpreted:
        ``encoded``, bytes)."""
        index: cython.Py_ssize_t = self._index(column, STRING)
        if column == self._tallied_column:  # read back, if counted
            self._tally_value = None
        self.held_bytes += self._texts.append(index, self.count, source, size, encoded)
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_span(
        self,
        column: cython.Py_ssize_t,
        data: bytes,
        start: cython.Py_ssize_t,
        stop: cython.Py_ssize_t,
    ) -> cython.int:
        """A string column's value that is ``data[start:stop]``, which the caller has made
        sure is UTF-8 (a reader that checked it as it read): compiled, copied from where
        it is, with no bytes or str made."""
        if start < 0 or stop < start or stop > len(data):
            raise ValueError(f"bytes {start}:{stop} are not within the {len(data)} given")
        if not cython.compiled:
            return self.set_utf8(column, None, stop - start, data[start:stop])
        return self.set_utf8(column, PyBytes_AS_STRING(data) + start, stop - start, None)

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set(self, column: cython.Py_ssize_t, value: object) -> cython.int:
        """Any column's value, of any type its column takes; None makes it null again."""
        code: cython.Py_ssize_t = self._place[column]
        storage: cython.Py_ssize_t = code & 3
        if value is None:
            return self._clear(code)
        if storage == SLOT:
            self._slots.put(self._index(column, SLOT), self.count, value)
            return 0
        if storage == NESTED:
            self._index(column, NESTED)
            self._clear(code)
            return self._put_list(self._lists[code >> 2], column, value)
        return self._add_text(self._index(column, STRING), column, value)

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def set_pairs(self, column: cython.Py_ssize_t, data: bytes, spans: bytearray) -> cython.int:
        """A map<string, string> column's value: an entry per span of ``spans`` (see
        :func:`add_span`), its key and value ``data``'s bytes there, which the caller has
        made sure are UTF-8 (a reader that checked them as it read: no str made)."""
        textmap: TextMap = self._storage(column, TextMap, "a map of strings to strings")
        whole_spans(spans)
        self._clear(self._place[column])
        before: cython.Py_ssize_t = textmap.held()
        at: cython.Py_ssize_t = self.count
        textmap.begin(at)
        textmap.add_spans(at, data, spans)
        self.held_bytes += textmap.held() - before
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def add_struct(
        self,
        column: cython.Py_ssize_t,
        first: cython.longlong,
        second: cython.longlong,
        third: cython.longlong,
        fourth: cython.longlong,
        nulls: cython.int,
    ) -> cython.int:
        """One more element of a list<struct> column of integer fields (message ids) in
        the row being built (its list begins with the first): the fields' values in
        order, bit n of ``nulls`` set where field n is null (values past its fields are
        ignored)."""
        structs: IntStructs = self._storage(column, IntStructs, "a list of integer structs")
        at: cython.Py_ssize_t = self.count
        if not structs.has(at):
            structs.begin(at)
        return structs.add(at, first, second, third, fourth, nulls)

    @cython.cfunc
    def _storage(self, column: cython.Py_ssize_t, kind: type, what: str) -> ListRows:
        """The storage of nested column ``column``, checked to be a ``kind``, in a buffer
        with room for the row."""
        self._index(column, NESTED)
        kept: ListRows = self._lists[self._place[column] >> 2]
        if not isinstance(kept, kind):
            raise TypeError(f"{self._columns[column]}: not {what}")
        return kept

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _put_list(self, kept: ListRows, column: cython.Py_ssize_t, value: object) -> cython.int:
        """A nested column's value as :meth:`set` takes it. For a map: (key, value) pairs
        or a dict (values: str, or UTF-8 bytes; a value may be None, a key may not); for a
        list of structs: dicts by field name (a field left out is null) or None. A value of
        another shape is refused whole: the row keeps no part of it."""
        name: str = self._columns[column]
        before: cython.Py_ssize_t = kept.held()
        at: cython.Py_ssize_t = self.count
        kept.begin(at)
        try:
            kept.put(at, value, name)
        except BaseException:
            kept.clear(at)
            raise
        self.held_bytes += kept.held() - before
        return 0

    @cython.ccall
    def has(self, column: cython.Py_ssize_t) -> cython.bint:
        """Whether the row being built has a value in ``column``."""
        return self._has(self._place[column], self.count)

    @cython.ccall
    def get(self, column: cython.Py_ssize_t) -> object:
        """The value the row being built has in ``column`` (None: null), as :meth:`set`
        takes it (a string column's as str, a binary column's as bytes)."""
        return self._value(column, self.count)

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def copy(
        self, source: ColumnBuffer, source_column: cython.Py_ssize_t, column: cython.Py_ssize_t
    ) -> cython.int:
        """Set ``column`` to the value ``source``'s row being built has in
        ``source_column`` (a column kept the same way): a frame's columns repeated on its
        messages' rows are copied as they are kept, text without a str made."""
        code: cython.Py_ssize_t = source._place[source_column]
        storage: cython.Py_ssize_t = code & 3
        at: cython.Py_ssize_t = source.count
        index: cython.Py_ssize_t = code >> 2
        if not source._has(code, at):
            return self._clear(self._place[column])
        if storage == SLOT:
            self._slots.put(self._index(column, SLOT), self.count, source._slots.get(index, at))
            return 0
        if storage == NESTED:
            return self.set(column, source._value(source_column, at))
        own: cython.Py_ssize_t = self._index(column, storage)
        if column == self._tallied_column:
            self._tally_value = None
        self.held_bytes += source._texts.copy_to(index, at, self._texts, own, self.count)
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def copy_columns(self, source: ColumnBuffer, pairs: cython.longlong[:, ::1]) -> cython.int:
        """:meth:`copy` for each (source column, column) of ``pairs`` (see :func:`pairs`)."""
        i: cython.Py_ssize_t
        for i in range(pairs.shape[0]):
            self.copy(source, pairs[i, 0], pairs[i, 1])
        return 0

    @cython.ccall
    @cython.exceptval(-1, check=True)
    def end_row(self) -> cython.bint:
        """The row being built is complete; True when it completed a batch's worth (the
        ``on_full`` given, if any, has then been called)."""
        if self.count >= self._limit:
            raise OverflowError("a full ColumnBuffer takes no row before take_batch()")
        if self._tallied_column >= 0:
            self._count_tallied()
        self.count += 1
        full: cython.bint = self.count >= self._limit
        if self._byte_limit and self.held_bytes >= self._byte_limit:
            full = True
        if full and self._on_full is not None:
            self._on_full()
        return full

    @cython.ccall
    @cython.exceptval(-1, check=False)  # an error is -1: no PyErr_Occurred() after each call
    def discard_row(self) -> cython.int:
        """Forget the row being built (a frame that turned out damaged midway)."""
        if self.count >= self._limit:
            return 0
        position: cython.Py_ssize_t
        for position in range(len(self._columns)):
            self._clear(self._place[position])
        return 0

    @cython.ccall
    def take_row(self) -> dict:
        """The row being built, as a dict of every column (None: null); then forgotten."""
        row: dict = self._row(self.count) if self.count < self._limit else {}
        self.discard_row()
        return row

    @cython.ccall
    @cython.exceptval(-1, check=True)
    def add(self, row: dict) -> cython.bint:
        """A whole row given as a dict keyed by column name (rare rows: a column it lacks
        is null, a key the schema lacks is ignored); as :meth:`end_row`."""
        for key, value in row.items():
            if value is not None:
                position = self._names.get(key)
                if position is not None:
                    self.set(position, value)
        return self.end_row()

    def take_rows(self) -> list[dict]:
        """The complete rows held, as dicts of every column (None: null); then empty."""
        rows = [self._row(at) for at in range(self.count)]
        self._recycle()
        return rows

    # -- the tallied column ----------------------------------------------------------------

    def tally(self, column: cython.Py_ssize_t) -> None:
        """Count the rows ended from now on by their value in ``column`` (a table's
        command or kind, for the run's summary): :meth:`tallied` says how many of each."""
        self._place[column]  # an IndexError for a column the table lacks
        self._tallied_column = column
        self._tally_value = None

    def tallied(self) -> dict[object, int]:
        """Rows ended since :meth:`tally` per value of the tallied column (None: null)."""
        return self._tally.counted()

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _count_tallied(self) -> cython.int:
        """Count the row being ended. Its value is the str last set in the column, or,
        when it came another way (copied, not text), read back."""
        value = self._tally_value
        self._tally_value = None
        if value is None:
            value = self._value(self._tallied_column, self.count)
        return self._tally.count(value)

    # -- the storages ----------------------------------------------------------------------

    @cython.cfunc
    def _has(self, code: cython.Py_ssize_t, at: cython.Py_ssize_t) -> cython.bint:
        storage: cython.Py_ssize_t = code & 3
        index: cython.Py_ssize_t = code >> 2
        if at >= self._limit:
            return False
        if storage == SLOT:
            return self._slots.has(index, at)
        if storage == NESTED:
            return cython.cast(ListRows, self._lists[index]).has(at)
        return self._texts.has(index, at)

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _clear(self, code: cython.Py_ssize_t) -> cython.int:
        """Make the row being built null in the column of place ``code``."""
        at: cython.Py_ssize_t = self.count
        if not self._has(code, at):
            return 0
        if self._tallied_column >= 0 and code == self._place[self._tallied_column]:
            self._tally_value = None
        storage: cython.Py_ssize_t = code & 3
        index: cython.Py_ssize_t = code >> 2
        if storage == SLOT:
            self._slots.clear(index, at)
        elif storage == NESTED:
            kept: ListRows = self._lists[index]
            held: cython.Py_ssize_t = kept.held()
            kept.clear(at)
            self.held_bytes -= held - kept.held()
        else:
            self.held_bytes -= self._texts.clear(index, at)
        return 0

    @cython.cfunc
    def _value(self, position: cython.Py_ssize_t, at: cython.Py_ssize_t) -> object:
        """Row ``at``'s value in column ``position`` (None: null)."""
        code: cython.Py_ssize_t = self._place[position]
        if not self._has(code, at):
            return None
        storage: cython.Py_ssize_t = code & 3
        index: cython.Py_ssize_t = code >> 2
        if storage == SLOT:
            value = self._slots.get(index, at)
            return bool(value) if position in self._booleans else value
        if storage == NESTED:
            return cython.cast(ListRows, self._lists[index]).value(at)
        return self._texts.value(index, at)

    def _row(self, at: cython.Py_ssize_t) -> dict:
        """Row ``at`` as a dict of every column (None: null), as the table will hold it."""
        return {name: self._value(position, at) for position, name in enumerate(self._columns)}

    @cython.cfunc
    @cython.exceptval(-1, check=False)
    def _add_text(
        self, index: cython.Py_ssize_t, column: cython.Py_ssize_t, value: object
    ) -> cython.int:
        """Set a string or binary value (str for a string column: its UTF-8)."""
        if column == self._tallied_column:  # the str set is the value, if any
            self._tally_value = None
        self.held_bytes += self._texts.put(index, self.count, value)
        if column == self._tallied_column and type(value) is str:
            self._tally_value = value
        return 0

    def take_batch(self) -> pa.RecordBatch | None:
        """The held rows as one record batch (None when there are none), then empty."""
        count = self.count
        if not count:
            return None
        arrays: list[Any] = [None] * len(self.schema)
        slots, texts, nested = self._positions
        for index, position in enumerate(slots):
            arrays[position] = self._slots.array(index, self.schema.field(position), count)
        for index, position in enumerate(texts):
            arrays[position] = self._texts.array(index, self.schema.field(position).type, count)
        for index, position in enumerate(nested):
            kept: ListRows = self._lists[index]
            kind = self.schema.field(position).type
            arrays[position] = kept.array(count, kind) if kept.filled else pa.nulls(count, kind)
        self._recycle()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _recycle(self) -> None:
        """Empty the buffer after its rows became Arrow arrays.

        Compiled, the arrays hold copies (made in C) and the storage is kept: fresh storage
        for every batch cost more, in zero-filled pages the kernel faults in, than copying
        what the batch holds. Interpreted, the arrays are views of the storage: it is new.
        """
        if not cython.compiled:
            self._reset()
            return
        rows: cython.Py_ssize_t = min(self.count + 1, self._limit)  # a row being built too
        self._slots.recycle(rows)
        self._texts.recycle(rows)
        for kept in self._lists:
            cython.cast(ListRows, kept).recycle(rows)
        self.count = 0
        self.held_bytes = 0


def pairs(source: str, table: str, columns: tuple[str, ...]) -> memoryview:
    """(position in table ``source``, position in ``table``) of each of ``columns``, for
    :meth:`ColumnBuffer.copy_columns`: the columns a row repeats from another table's."""
    found = memoryview(bytearray(16 * len(columns))).cast("q", (len(columns), 2))
    for i, column in enumerate(columns):
        found[i, 0] = schema_position(source, column)
        found[i, 1] = schema_position(table, column)
    return found


class RowSink:
    """Where decoders put rows: the row builder of each table they fill. Its owner (the
    dataset writer, a Spark task) gives each builder the ``on_full`` that takes its
    batches; :meth:`calling` makes one that hands rows on one by one."""

    __slots__ = ("anomalies", "frames", "messages")

    def __init__(
        self, frames: ColumnBuffer, messages: ColumnBuffer, anomalies: ColumnBuffer
    ) -> None:
        self.frames = frames
        self.messages = messages
        self.anomalies = anomalies

    @classmethod
    def calling(
        cls,
        frame: Callable[[Row], None],
        message: Callable[[Row], None],
        anomaly: Callable[[Row], None],
    ) -> RowSink:
        """A sink whose rows, each as a dict once ended, go to the callable of their table
        (``pwcap show`` prints frames as they are decoded; rows held back wait in a list)."""
        return cls(
            _OneByOne("frames", frame).buffer,
            _OneByOne("messages", message).buffer,
            _OneByOne("anomalies", anomaly).buffer,
        )


class _OneByOne:
    """A builder of one row at a time, each handed on as a dict when it ends."""

    __slots__ = ("_each", "buffer")

    def __init__(self, table: str, each: Callable[[Row], None]) -> None:
        self._each = each
        self.buffer = ColumnBuffer(arrow_schema(table), 1, 0, self._ended)

    def _ended(self) -> None:
        for row in self.buffer.take_rows():
            self._each(row)
