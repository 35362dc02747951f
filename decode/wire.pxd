# The C declarations of wire.py's Fields cursor (Cython reads this file beside wire.py
# when it compiles it), so that the other compiled readers (hot.py, metadata.py) call
# its methods and read its fields as C, not through Python attributes.

cimport cython


@cython.final  # never subclassed: its methods are direct C calls, not through a vtable
cdef class Fields:
    cdef readonly bytes data
    cdef readonly Py_ssize_t pos
    cdef readonly Py_ssize_t end
    cdef readonly int wire_type
    cdef readonly unsigned long long value
    cdef readonly Py_ssize_t start
    cdef readonly Py_ssize_t stop
    cdef readonly bint broken

    cpdef unsigned long long varint(self)
    cpdef int next(self)
    cdef unsigned long long _fixed(self, Py_ssize_t size)
    cdef int place(self, bytes data, Py_ssize_t pos, Py_ssize_t end) except -1


cpdef Fields cursor(bytes data, Py_ssize_t pos, Py_ssize_t end)
