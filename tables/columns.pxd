# The C declarations of columns.py's ColumnBuffer (Cython reads this file beside columns.py
# when it compiles it), so that the decoders set their rows' columns with C calls.

cimport cython


cdef class _ListRows:
    cdef bytearray row_ends
    cdef bytearray valid
    cdef Py_ssize_t entries
    cdef Py_ssize_t recorded
    cdef Py_ssize_t filled

    cdef Py_ssize_t held(self) except? -1
    cdef bint has(self, Py_ssize_t at)
    cdef int begin(self, Py_ssize_t at) except -1
    cdef int _added(self, Py_ssize_t at) except -1
    cdef int clear(self, Py_ssize_t at) except -1
    cdef object value(self, Py_ssize_t at)
    cdef object _element(self, Py_ssize_t entry)
    cdef int put(self, Py_ssize_t at, object value, str name) except -1
    cdef int _end_nulls(self, Py_ssize_t upto) except -1
    cdef int recycle(self, Py_ssize_t rows) except -1


cdef class _TextMap(_ListRows):
    cdef bytearray keys
    cdef bytearray items
    cdef bytearray key_ends
    cdef bytearray item_ends
    cdef bytearray item_valid

    cdef Py_ssize_t held(self) except? -1
    cdef int add(
        self, Py_ssize_t at, bytes key_data, Py_ssize_t key_start, Py_ssize_t key_stop,
        bytes item_data, Py_ssize_t item_start, Py_ssize_t item_stop
    ) except -1
    cdef object _element(self, Py_ssize_t entry)
    cdef int put(self, Py_ssize_t at, object value, str name) except -1
    cdef int recycle(self, Py_ssize_t rows) except -1


cdef class _IntStructs(_ListRows):
    cdef list fields
    cdef Py_ssize_t width
    cdef list slots
    cdef list present
    cdef bytearray element_valid

    cdef int add(
        self, Py_ssize_t at, long long first, long long second, long long third,
        long long fourth, int nulls
    ) except -1
    cdef int add_null(self, Py_ssize_t at) except -1
    cdef object _element(self, Py_ssize_t entry)
    cdef int put(self, Py_ssize_t at, object value, str name) except -1


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
    # Slots: [slot, row] values and validity bytes, and per slot the rows that set it.
    cdef long long[:, ::1] _data
    cdef unsigned char[:, ::1] _valid
    cdef bytearray _data_bytes
    cdef bytearray _valid_bytes
    cdef long long[::1] _set
    # Texts (strings, then binaries): per text column its bytes, [text, row + 1] the end
    # offset of each row's value, how many rows have their end recorded, and validity.
    cdef list _text
    cdef int[:, ::1] _ends
    cdef bytearray _ends_bytes
    cdef long long[::1] _recorded
    cdef unsigned char[:, ::1] _text_valid
    cdef bytearray _text_valid_bytes
    cdef long long[::1] _text_set
    cdef Py_ssize_t _strings  # text columns below this index are strings
    cdef list _lists  # per nested column: its storage (_TextMap, _IntStructs)
    # The tallied column (-1: none), the str set in it on the row being built, and the
    # counts: the first TALLY_SLOTS values and theirs, then a dict.
    cdef Py_ssize_t _tallied_column
    cdef object _tally_value
    cdef list _tally_values
    cdef long long[::1] _tally_counts
    cdef dict _tally_more

    cdef inline Py_ssize_t _index(self, Py_ssize_t column, Py_ssize_t storage) except? -1
    cpdef int set_int(self, Py_ssize_t column, long long value) except -1
    cpdef int set_text(self, Py_ssize_t column, str value) except -1
    cpdef int set(self, Py_ssize_t column, object value) except -1
    cpdef int set_pairs(self, Py_ssize_t column, bytes data, bytearray spans) except -1
    cpdef int add_struct(
        self, Py_ssize_t column, long long first, long long second, long long third,
        long long fourth, int nulls
    ) except -1
    cdef int _put_list(self, _ListRows kept, Py_ssize_t column, object value) except -1
    cdef _ListRows _storage(self, Py_ssize_t column, type kind, str what)
    cpdef bint has(self, Py_ssize_t column)
    cpdef object get(self, Py_ssize_t column)
    cpdef int copy(self, ColumnBuffer source, Py_ssize_t source_column, Py_ssize_t column) except -1
    cpdef int copy_columns(self, ColumnBuffer source, long long[:, ::1] pairs) except -1
    cpdef bint end_row(self) except? -1
    cpdef int discard_row(self) except -1
    cpdef dict take_row(self)
    cpdef bint add(self, dict row) except? -1
    cdef int _count_tallied(self) except -1
    cdef inline void _put_slot(self, Py_ssize_t index, long long value) noexcept
    cdef inline bint _has(self, Py_ssize_t code, Py_ssize_t at)
    cdef int _clear(self, Py_ssize_t code) except -1
    cdef object _value(self, Py_ssize_t position, Py_ssize_t at)
    cdef int _add_text(self, Py_ssize_t index, Py_ssize_t column, object value) except -1
    cdef int _append(
        self, Py_ssize_t index, Py_ssize_t column, const char *source, Py_ssize_t size,
        object encoded
    ) except -1
    cdef inline Py_ssize_t _end_nulls(self, Py_ssize_t index, Py_ssize_t upto) except? -1


cpdef int add_span(
    bytearray spans, Py_ssize_t key_start, Py_ssize_t key_stop, Py_ssize_t value_start,
    Py_ssize_t value_stop
) except -1
