# The C declarations of texts.py's TextColumns (Cython reads this file beside texts.py
# when it compiles it), so that the row builder (columns.py) sets and reads them with C
# calls.

cimport cython


@cython.final
cdef class TextColumns:
    cdef list names  # per column (its index), its name: for errors
    cdef Py_ssize_t strings  # columns below this index are strings, the rest binaries
    cdef Py_ssize_t limit
    # Per column its bytes, [column, row + 1] the end offset of each row's value (and the
    # bytearray under them), how many rows have their end recorded, and validity.
    cdef list text
    cdef int[:, ::1] ends
    cdef bytearray ends_bytes
    cdef long long[::1] recorded
    cdef unsigned char[:, ::1] valid
    cdef bytearray valid_bytes
    cdef long long[::1] filled

    cdef bint has(self, Py_ssize_t index, Py_ssize_t at) noexcept
    cdef Py_ssize_t put(self, Py_ssize_t index, Py_ssize_t at, object value) except? -1
    cdef Py_ssize_t append(
        self, Py_ssize_t index, Py_ssize_t at, const char *source, Py_ssize_t size,
        object encoded
    ) except? -1
    cdef Py_ssize_t copy_to(
        self, Py_ssize_t index, Py_ssize_t at, TextColumns target, Py_ssize_t target_index,
        Py_ssize_t target_at
    ) except? -1
    cdef Py_ssize_t clear(self, Py_ssize_t index, Py_ssize_t at) except? -1
    cdef inline Py_ssize_t end_nulls(self, Py_ssize_t index, Py_ssize_t upto) except? -1
    cdef object value(self, Py_ssize_t index, Py_ssize_t at)
    cdef int recycle(self, Py_ssize_t rows) except -1


cdef bytes encode(object value, bint string, str column)
