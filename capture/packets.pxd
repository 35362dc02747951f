# The C declarations of packets.py's PacketParser (Cython reads this file beside
# packets.py when it compiles it), so that the record reader (reader.py) calls its parse
# and reads the segment it found as C, not through Python attributes.

cdef class PacketParser:
    cdef public object stats
    cdef dict _fragments
    cdef Py_ssize_t _fragment_bytes
    cdef readonly bytes src
    cdef readonly bytes dst
    cdef readonly long sport
    cdef readonly long dport
    cdef readonly long long seq
    cdef readonly long long ack
    cdef readonly long flags
    cdef readonly long window
    cdef readonly long wscale
    cdef readonly bytes payload
    cdef readonly long long cut

    cpdef bint parse(self, bytes buf, Py_ssize_t start, Py_ssize_t stop, long linktype,
                     long long orig_len) except -1
    cdef bint _link(self, bytes buf, Py_ssize_t start, Py_ssize_t size, long linktype,
                    long long orig_len) except -1
    cdef bint _ipv4(self, bytes buf, Py_ssize_t base, Py_ssize_t size, Py_ssize_t offset,
                    long long orig_len) except -1
    cdef bint _ipv6(self, bytes buf, Py_ssize_t base, Py_ssize_t size, Py_ssize_t offset,
                    long long orig_len) except -1
    cdef bint _tcp(self, bytes buf, Py_ssize_t base, Py_ssize_t size, Py_ssize_t offset,
                   long long end) except -1
    cdef bint _malformed(self) except -1
    cdef bint _non_tcp(self) except -1
