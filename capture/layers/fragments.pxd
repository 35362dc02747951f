from pwcap.capture.layers.cursor cimport Cursor


cdef class _Pair:
    cdef public tuple key
    cdef public dict waiting


cdef class _Datagram:
    cdef public tuple key
    cdef public _Pair pair
    cdef public long long first_ts
    cdef public list starts
    cdef public list pieces
    cdef public Py_ssize_t size
    cdef public Py_ssize_t length
    cdef public long protocol
    cdef public bint doomed
    cdef public bint gone

    cdef bint add(self, Py_ssize_t start, bytes piece, bint last) except -1
    cdef Py_ssize_t _end(self, Py_ssize_t index) except? -1
    cdef bytes whole(self)


cdef class Fragments:
    cdef public object stats
    cdef dict _pending
    cdef dict _pairs
    cdef Py_ssize_t _bytes
    cdef long long _oldest_ts
    cdef long long _fragments
    cdef long long _reassembled
    cdef public long protocol

    cpdef bytes add(self, Cursor c, int version, long long ident, long offset, long more,
                    long protocol)
    cpdef void count(self)
    cdef _Datagram _open(self, tuple key, tuple pair_key, long long ts)
    cdef void _expire(self, long long ts) except *
    cdef void _doom(self, _Datagram datagram) except *
    cdef void _drop(self, _Datagram datagram) except *
    cdef void _remove(self, _Datagram datagram) except *
