# The C declarations of metadata.py's readings (Cython reads this file beside metadata.py
# when it compiles it), so that the entry decoder (messages.py) and the batch splitter
# (batch.py) read an entry's or a member's fields as C fields, not through Python
# attributes.

from pwcap.decode.wire cimport Fields


cdef class _Reading:
    cdef readonly unsigned long long seen
    cdef readonly bytes pairs_data
    cdef readonly bytearray pairs
    cdef unsigned long long _required
    cdef unsigned long long _repeated
    cdef Fields _pair
    cdef Fields _fields
    cdef bytearray _spans

    cdef void _new(self)
    cdef void _start(self, unsigned long long required, int properties_field)
    cpdef bint read(self, bytes data, Py_ssize_t start, Py_ssize_t end)
    cpdef bint put(self, int number, Fields fields, bytes data)
    cdef bint _property(self, Fields fields, bytes data)
    cdef bint has(self, int number)


cdef class EntryMetadata(_Reading):
    cdef readonly str producer_name
    cdef readonly object sequence_id
    cdef readonly object publish_time
    cdef readonly str partition_key
    cdef readonly int compression
    cdef readonly object uncompressed_size
    cdef readonly object num_messages_in_batch
    cdef readonly object event_time
    # Never on the wire reader's common shape: set from the generated class's reading.
    cdef readonly bint encrypted
    cdef readonly bytes ordering_key
    cdef readonly object replicated_from
    cdef readonly bint null_value
    cdef readonly object uuid
    cdef readonly object num_chunks_from_msg
    cdef readonly object chunk_id
    cdef readonly object total_chunk_msg_size

    cdef void _defaults(self)


cdef class MemberMetadata(_Reading):
    cdef readonly int payload_size
    cdef readonly bytes key_data
    cdef readonly Py_ssize_t key_start
    cdef readonly Py_ssize_t key_stop
    cdef readonly unsigned long long event_time
    cdef readonly bytes ordering_key
    cdef readonly unsigned long long sequence_id
    cdef readonly bint null_value

    cdef void _defaults(self)
    cpdef bint reread(self, bytes data, Py_ssize_t start, Py_ssize_t end)


cpdef EntryMetadata read_metadata(bytes data, Py_ssize_t start, Py_ssize_t end)
cpdef MemberMetadata read_single(bytes data, Py_ssize_t start, Py_ssize_t end)
cpdef EntryMetadata entry_from_generated(object md)
cpdef MemberMetadata member_from_generated(object single)
