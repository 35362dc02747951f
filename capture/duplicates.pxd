# The C declarations of duplicates.py (Cython reads this file beside it when it compiles
# it), so that the packet parser checks each segment with C calls.

cdef class Duplicates:
    cdef public object stats
    cdef unsigned long long[:] _prints
    cdef long long[:] _times
    cdef long[:] _tunnels
    cdef list _names
    cdef dict _numbers
    cdef public dict aliases

    cpdef bint first_copy(self, unsigned long long fingerprint, long long ts, str tunnel,
                          bytes src, long sport, bytes dst, long dport) except -1
    cpdef str alias(self, str tunnel, bytes src, long sport, bytes dst, long dport)
    cdef long _number(self, str tunnel)

cdef unsigned long long _mix(unsigned long long hash, bytes data, Py_ssize_t lo, Py_ssize_t hi)
cpdef unsigned long long fingerprint(bytes buf, Py_ssize_t header, Py_ssize_t payload,
                                     Py_ssize_t captured, bytes src, bytes dst, long ident,
                                     long long length)
