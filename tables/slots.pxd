# The C declarations of slots.py's SlotColumns (Cython reads this file beside slots.py when
# it compiles it), so that the row builder (columns.py) sets and reads them with C calls.

cimport cython


@cython.final
cdef class SlotColumns:
    cdef Py_ssize_t limit
    # [column, row] values and validity bytes (and the bytearrays under them), and per
    # column the rows that set it.
    cdef long long[:, ::1] data
    cdef unsigned char[:, ::1] valid
    cdef bytearray data_bytes
    cdef bytearray valid_bytes
    cdef long long[::1] filled

    cdef void put(self, Py_ssize_t index, Py_ssize_t at, long long value) noexcept
    cdef bint has(self, Py_ssize_t index, Py_ssize_t at) noexcept
    cdef long long get(self, Py_ssize_t index, Py_ssize_t at) noexcept
    cdef void clear(self, Py_ssize_t index, Py_ssize_t at) noexcept
    cdef int recycle(self, Py_ssize_t rows) except -1
