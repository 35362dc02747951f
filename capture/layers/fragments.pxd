from pwcap.capture.layers.cursor cimport Cursor

cdef class Fragments:
    cdef public object stats
    cdef dict _pending
    cdef dict _pairs
    cdef Py_ssize_t _bytes
    cdef public long protocol

    cpdef bytes add(self, Cursor c, int version, long long ident, long offset, long more,
                    long protocol)
