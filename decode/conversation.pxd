# The C declarations of conversation.py's Conversation (Cython reads this file beside
# conversation.py when it compiles it), so that the Pulsar decoder (decoder.py) tells it of
# each delivery with a C call.

from pwcap.tables.columns cimport ColumnBuffer


cdef class Conversation:
    cdef public ColumnBuffer rows
    cdef public object anomalies
    cdef object _capture
    cdef object _conn_id
    cdef object _protocol
    cdef object _unmatched
    cdef list _suspects

    cpdef void on_data(self, object direction, object ts)
