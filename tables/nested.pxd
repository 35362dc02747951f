# The C declarations of nested.py's storages (Cython reads this file beside nested.py
# when it compiles it), so that the row builder (columns.py) fills them with C calls.

cdef class ListRows:
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


cdef class TextMap(ListRows):
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
    cdef int add_spans(self, Py_ssize_t at, bytes data, bytearray spans) except -1
    cdef object _element(self, Py_ssize_t entry)
    cdef int put(self, Py_ssize_t at, object value, str name) except -1
    cdef int recycle(self, Py_ssize_t rows) except -1


cdef class IntStructs(ListRows):
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


cdef int whole_spans(bytearray spans) except -1
cpdef int clear_spans(bytearray spans) except -1
cpdef int add_span(
    bytearray spans, Py_ssize_t key_start, Py_ssize_t key_stop, Py_ssize_t value_start,
    Py_ssize_t value_stop
) except -1
