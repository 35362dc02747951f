# The C declarations of messages.py's EntryDecoder (Cython reads this file beside
# messages.py when it compiles it), so that the decoder (decoder.py) hands it each payload
# frame's entry with a C call, and the entry's columns are its C fields while its message
# rows are built.

from pwcap.decode.pulsar.metadata cimport EntryMetadata, MemberMetadata
from pwcap.tables.columns cimport ColumnBuffer

cdef class EntryDecoder:
    cdef readonly ColumnBuffer messages
    cdef bint _payloads
    cdef object _limit
    cdef object _anomaly
    cdef object _chunks
    cdef ColumnBuffer _frames
    cdef bint _delivery
    cdef str _producer_name
    cdef object _sequence_id
    cdef object _publish_time
    cdef object _event_time
    cdef object _key
    cdef str _compression
    cdef object _count
    cdef object _checksum_ok
    cdef object _broker_timestamp
    cdef object _broker_index
    cdef object _replicated_from
    cdef object _ack_set

    # Each returns None, or raises: an entry's damage reaches the decoder's frame handler.
    cpdef object deliver_only(self, object ack_set)
    cpdef object decode(self, ColumnBuffer frames, bint delivery, bytes buf, Py_ssize_t start,
                        Py_ssize_t end, int label)
    cdef object _contents(self, EntryMetadata md, object payload, object count, object acked)
    cdef object _member(self, Py_ssize_t index, MemberMetadata single)
    cdef object _begin(self)
    cdef object _whole(self, EntryMetadata md)
    cdef object _emit(self, object payload)
