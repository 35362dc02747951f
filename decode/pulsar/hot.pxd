# The C declarations of hot.py's HotReader (Cython reads this file beside hot.py when it
# compiles it), so that the decoder (decoder.py) and the metadata reader (metadata.py)
# call it as C, not through Python attributes.

from pwcap.decode.wire cimport Fields
from pwcap.tables.columns cimport ColumnBuffer

cdef class HotReader:
    cdef Fields _fields
    cdef Fields _id
    cdef int _type
    cdef long long _ledger
    cdef long long _entry
    cdef int _partition
    cdef int _batch_index

    cpdef int command(self, bytes data, Py_ssize_t start, Py_ssize_t end)
    cdef int _find(self, bytes data, Py_ssize_t start, Py_ssize_t end)
    cpdef bint columns(self, ColumnBuffer rows)
    cdef void _release(self)
    cdef bint _send_receipt(self, ColumnBuffer rows)
    cdef bint _message(self, ColumnBuffer rows)
    cdef bint _ack(self, ColumnBuffer rows)
    cdef bint _message_id(self)
    cdef void _put_message_id(self, ColumnBuffer rows)


cpdef int int32(unsigned long long value)
cpdef int id_nulls(long long partition, long long batch_index)
