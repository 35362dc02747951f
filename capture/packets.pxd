# The C declarations of packets.py's PacketParser (Cython reads this file beside
# packets.py when it compiles it), so that the record reader (reader.py) calls its parse
# and reads the segment it found as C, not through Python attributes.

from pwcap.capture.duplicates cimport Duplicates
from pwcap.capture.layers.cursor cimport Cursor
from pwcap.capture.layers.fragments cimport Fragments

cdef class PacketParser:
    cdef public object stats
    cdef Cursor _cursor
    cdef Fragments _fragments
    cdef Duplicates _duplicates
    cdef bytes _tunnels
    cdef dict _labels
    cdef long long[:] _seen
    cdef Py_ssize_t _seen_count
    cdef str _tunnel_seen
    cdef str _run
    cdef long long _run_count
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
    cdef readonly str tunnel
    cdef long _ident
    cdef unsigned long long _fingerprint

    cpdef bint parse(self, bytes buf, Py_ssize_t start, Py_ssize_t stop, long linktype,
                     long long orig_len, long long ts) except -1
    cdef bint _walk(self, bytes buf, Py_ssize_t start, Py_ssize_t size, long linktype,
                    long long orig_len, long long ts) except -1
    cdef bint _tcp(self, bytes buf, Py_ssize_t base, Py_ssize_t size, Py_ssize_t offset,
                   long long end) except -1
    cdef bint _take(self, long long ts) except -1
    cdef void _encapsulation(self, Cursor c)
    cdef bint _skip(self, int code, long linktype) except -1
    cpdef void count(self)
    cdef void _count_run(self) except *
