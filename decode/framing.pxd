# The C declarations of framing.py's classes (Cython reads this file beside framing.py when
# it compiles it), so that a stream judges each header and hands each frame on with C calls,
# and its state is C integers.

cdef class FrameFormat:
    cdef readonly Py_ssize_t header_size
    cdef readonly bint resync_at_last_skip

    cpdef tuple judge(self, bytes buf, Py_ssize_t pos, Py_ssize_t n, long long max_frame)


cdef class FrameHandler:
    cpdef object frame(self, bytes buf, Py_ssize_t start, Py_ssize_t end, long long field,
                       long long offset, long long ts_first, long long ts)


cdef class CallingHandler(FrameHandler):
    cdef object _call


cdef class FrameStream:
    cdef object _budget
    cdef list _chunk_ts
    cdef list _chunks
    cdef long long _discard
    cdef FrameFormat _format
    cdef FrameHandler _handle
    cdef long long _have
    cdef long long _hunt_from
    cdef object _lost
    cdef long long _max_frame
    cdef int _mode
    cdef long long _need
    cdef object _report
    cdef long long _skip_ts
    cdef long long _skipped
    cdef long long _start_offset

    cpdef void feed(self, long long ts, long long offset, bytes data)
    cdef void _parse(self, bytes data, long long offset, long long ts, list chunk_ts)
