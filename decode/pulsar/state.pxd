# The C declarations of state.py's connection state, merge_names and permit functions
# (Cython reads this file beside state.py when it compiles it), so that the decoder
# (decoder.py) pairs a frame, merges its names and charges a delivery with C calls.

from pwcap.tables.columns cimport ColumnBuffer


cdef class ConnectionState:
    cdef readonly dict producers
    cdef readonly dict consumers
    cdef dict _requests
    cdef dict _sends
    cdef dict _acks
    cdef dict _in_order
    cdef public bint complete

    cpdef void fill_names(self, ColumnBuffer rows, bint named)
    cpdef bint pair(self, int role, ColumnBuffer rows, int direction, bint final)
    cdef bint _pair_request(self, ColumnBuffer rows, int direction, bint final)
    cdef bint _pair_send(self, ColumnBuffer rows, int direction, bint final)
    cdef bint _pair_receipt(self, ColumnBuffer rows, int direction, bint final)
    cdef bint _pair_ack(self, ColumnBuffer rows, int direction, bint final)
    cdef bint _pair_ack_response(self, ColumnBuffer rows, int direction, bint final)
    cdef bint _pair_response(self, ColumnBuffer rows, int direction, bint final)


cpdef void merge_names(ColumnBuffer rows, dict names, bint keep_row_values)
cpdef void grant(dict consumers, object consumer_id, object permits)
cpdef object spend(dict consumers, object consumer_id, object messages)
