# The C declarations of tcpflow.py's TcpSide (Cython reads this file beside tcpflow.py
# when it compiles it), so that reassembly tells it of each segment with C calls.

cdef class TcpSide:
    cdef public TcpSide peer
    cdef public long long syn_ts
    cdef public long long handshake_us
    cdef public long long scale
    cdef public long long min_window
    cdef public long long zero_windows
    cdef public long long zero_since
    cdef public long long zero_us
    cdef public long long longest_zero_us
    cdef public long long longest_zero_ts
    cdef public long long last_ts
    cdef public long long highest
    cdef public long long timed_end
    cdef public long long timed_ts
    cdef public long long rtt_samples
    cdef public long long rtt_min_us
    cdef public long long rtt_max_us
    cdef public long long rtt_sum_us
    cdef public long long retransmitted
    cdef public long long retransmitted_bytes
    cdef public long long burst_ts
    cdef public long long burst
    cdef public long long worst_burst
    cdef public long long worst_burst_ts

    cpdef void segment(self, long long ts, long long window, bint syn, bint rst, bint acks,
                       long scale)
    cdef void _end_zero(self, long long ts)
    cpdef void data(self, long long ts, long long at, long long end)
    cpdef void resent(self, long long ts, long long at, long long size)
    cpdef void acked(self, long long ts, long long upto)
