# The C declarations of records.py's record walks (Cython reads this file beside
# records.py when it compiles it), so that the record reader (reader.py) steps through a
# capture and reads each record's fields as C, not through Python attributes.

cdef class RecordWalk:
    cdef readonly bytes buf
    cdef readonly long long ts
    cdef readonly long linktype
    cdef readonly Py_ssize_t start
    cdef readonly Py_ssize_t stop
    cdef readonly long long orig_len
    cdef object _stream
    cdef str _name
    cdef object _stats
    cdef Py_ssize_t _pos
    cdef long long _consumed
    cdef bint _ended
    cdef public object on_secrets

    cpdef bint next(self) except -1
    cdef bint _refill(self, Py_ssize_t need) except -1
    cdef bint _padding(self) except -1


cdef class _PcapWalk(RecordWalk):
    cdef bint _big
    cdef bint _nanos
    cdef bint _begun

    cdef int _begin(self) except -1


cdef class _Interface:
    cdef readonly long linktype
    cdef readonly unsigned long long snaplen
    cdef object _mul
    cdef object _div
    cdef object _offset_us
    cdef bint fits
    cdef unsigned long long mul
    cdef unsigned long long div
    cdef long long offset_us
    cdef unsigned long long exact_limit

    cdef long long time(self, unsigned long long stamp) except -2


cdef class _PcapngWalk(RecordWalk):
    cdef bint _big
    cdef list _interfaces

    cdef bint _block(self, bytes buf, Py_ssize_t pos, unsigned long long block,
                     unsigned long long length) except -1
    cdef bint _packet(self, _Interface interface, Py_ssize_t start, Py_ssize_t caplen,
                      unsigned long long orig_len) except -1
