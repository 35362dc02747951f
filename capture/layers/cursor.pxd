# The C declarations of cursor.py's Cursor (Cython reads this file beside cursor.py when
# it compiles it), so that each layer module reads the record's bytes as C.

cdef class Cursor:
    cdef public bytes buf
    cdef public Py_ssize_t base
    cdef public Py_ssize_t at
    cdef public Py_ssize_t size
    cdef public long long end
    cdef public long long ts
    cdef long long[:] tags
    cdef public Py_ssize_t count
    cdef public bytes src
    cdef public bytes dst
    cdef public long ident
    cdef public long port

    cpdef int start(self, bytes buf, Py_ssize_t base, Py_ssize_t size, long long end,
                    long long ts) except -1
    cpdef int replace(self, bytes whole) except -1
    cdef bint room(self, Py_ssize_t count)
    cdef long u8(self, Py_ssize_t offset)
    cdef long u16(self, Py_ssize_t offset)
    cdef long long u32(self, Py_ssize_t offset)
    cdef bytes copy(self, Py_ssize_t lo, Py_ssize_t hi)
    cdef void carry(self, long long length)
    cdef bint tag(self, int kind, long long ident) except -1
    cpdef tuple key(self)
