# The C declarations of columns.py's ColumnBuffer (Cython reads this file beside columns.py
# when it compiles it), so that the decoders set their rows' columns with C calls.

cimport cython

from pwcap.tables.nested cimport ListRows
from pwcap.tables.slots cimport SlotColumns
from pwcap.tables.tally cimport Tally
from pwcap.tables.texts cimport TextColumns


@cython.final
cdef class ColumnBuffer:
    cdef readonly object schema
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t held_bytes
    cdef Py_ssize_t _limit
    cdef Py_ssize_t _byte_limit
    cdef object _on_full
    cdef dict _names  # column name -> position
    cdef list _columns  # position -> column name
    cdef frozenset _booleans  # positions of the boolean columns
    cdef long long[::1] _place  # position -> index << 2 | storage
    cdef list _positions  # per storage: schema positions of its columns
    cdef Py_ssize_t _strings  # text columns below this index are strings
    cdef SlotColumns _slots  # integers, timestamps, booleans
    cdef TextColumns _texts  # strings, then binaries
    cdef list _lists  # per nested column: its storage (TextMap, IntStructs)
    # The tallied column (-1: none), the str set in it on the row being built, the counts.
    cdef Py_ssize_t _tallied_column
    cdef object _tally_value
    cdef Tally _tally

    cdef inline Py_ssize_t _index(self, Py_ssize_t column, Py_ssize_t storage) except? -1
    cpdef int set_int(self, Py_ssize_t column, long long value) except -1
    cpdef int set_text(self, Py_ssize_t column, str value) except -1
    cdef int set_utf8(self, Py_ssize_t column, const char *source, Py_ssize_t size,
                      object encoded) except -1
    cpdef int set_span(self, Py_ssize_t column, bytes data, Py_ssize_t start,
                       Py_ssize_t stop) except -1
    cpdef int set(self, Py_ssize_t column, object value) except -1
    cpdef int set_pairs(self, Py_ssize_t column, bytes data, bytearray spans) except -1
    cpdef int add_struct(
        self, Py_ssize_t column, long long first, long long second, long long third,
        long long fourth, int nulls
    ) except -1
    cdef int _put_list(self, ListRows kept, Py_ssize_t column, object value) except -1
    cdef ListRows _storage(self, Py_ssize_t column, type kind, str what)
    cpdef bint has(self, Py_ssize_t column)
    cpdef object get(self, Py_ssize_t column)
    cpdef int copy(self, ColumnBuffer source, Py_ssize_t source_column, Py_ssize_t column) except -1
    cpdef int copy_columns(self, ColumnBuffer source, long long[:, ::1] pairs) except -1
    cpdef bint end_row(self) except? -1
    cpdef int discard_row(self) except -1
    cpdef dict take_row(self)
    cpdef bint add(self, dict row) except? -1
    cdef int _count_tallied(self) except -1
    cdef inline bint _has(self, Py_ssize_t code, Py_ssize_t at)
    cdef int _clear(self, Py_ssize_t code) except -1
    cdef object _value(self, Py_ssize_t position, Py_ssize_t at)
    cdef int _add_text(self, Py_ssize_t index, Py_ssize_t column, object value) except -1
