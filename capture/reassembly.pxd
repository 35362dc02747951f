# The C declarations of reassembly.py's classes (Cython reads this file beside
# reassembly.py when it compiles it), so that the record reader (reader.py) hands it
# segments as C calls, and a direction's sequence state is C integers.

from pwcap.capture.tcpflow cimport TcpSide

cdef class _Half:
    cdef public object conn
    cdef public object side
    cdef public _Half peer
    cdef public bint started
    cdef public long long base
    cdef public long long next
    cdef public list held
    cdef public long long held_bytes
    cdef public object holding
    cdef public long long owed
    cdef public long long waited
    cdef public object fin
    cdef public object sink
    cdef public object stats
    cdef public TcpSide tcp

    cpdef long long offset(self, long long seq)
    cpdef object direction(self)
    cpdef bint done(self)
    cpdef long long acknowledged(self, long long ack)
    cpdef receive(self, object ts, long long seq, object payload, long long cut, long long after)
    cpdef _accept(self, long long at, object ts, object payload, long long cut)


cdef class Reassembler:
    cdef public object sink
    cdef public object stats
    cdef public frozenset server_ports
    cdef public object scope
    cdef dict _halves
    cdef dict _open
    cdef dict _closed
    cdef dict _closed_ids
    cdef object _holding
    cdef long long _segments

    cpdef void count_segments(self)
    cpdef segment(self, object ts, object src, long sport, object dst, long dport,
                  long long seq, long long ack, long flags, object payload, long long cut=*,
                  long window=*, long wscale=*, object tunnel=*)
