# The C declarations of batch.py's Members (Cython reads this file beside batch.py when
# it compiles it), so that the entry decoder (messages.py) walks a batch with C calls.

cimport cython

from pwcap.decode.pulsar.metadata cimport MemberMetadata


@cython.final
cdef class Members:
    cdef readonly bytes data
    cdef readonly Py_ssize_t count
    cdef readonly Py_ssize_t index
    cdef readonly MemberMetadata single
    cdef readonly Py_ssize_t start
    cdef readonly Py_ssize_t stop
    cdef MemberMetadata _reading

    cpdef bint next(self) except -1
