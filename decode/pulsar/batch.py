"""Splitting an uncompressed batch payload into its messages.

A batch is a run of ``[size u32][SingleMessageMetadata][payload_size bytes]``, one per
message; the entry's ``num_messages_in_batch`` says how many.
"""

from __future__ import annotations

import cython
from google.protobuf.message import DecodeError

from ..wire import VARINT, field_number
from ._pb.pulsar_api_pb2 import SingleMessageMetadata

if cython.compiled:  # the C declarations (metadata.pxd, payload.pxd): C calls and C fields
    from cython.cimports.pwcap.decode.pulsar.metadata import MemberMetadata, member_from_generated
    from cython.cimports.pwcap.decode.pulsar.payload import u32
else:
    from .metadata import MemberMetadata, member_from_generated
    from .payload import u32

# A member's one required field, by number from the schema (a C global when compiled).
_PAYLOAD_SIZE = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "payload_size", VARINT)
)
# The smallest member: its 4-byte size and a SingleMessageMetadata holding only the required
# payload_size (one tag byte, one varint byte), with an empty payload.
MIN_MEMBER_BYTES = cython.declare(cython.Py_ssize_t, 6)


class BadBatch(Exception):
    """The batch breaks off: the messages before the damage were read already."""


@cython.cclass  # final (batch.pxd): its C methods are called directly
class Members:
    """The messages of a batch, read one at a time by :meth:`next`: a batch of a million
    bytes can hold a hundred thousand empty messages, and their rows leave for Arrow as
    they come. After a :meth:`next` that returned True, ``index`` is the message's place,
    ``single`` its metadata (until the next :meth:`next`: every member of the common shape
    is read into the same reading) and ``data[start:stop]`` its payload; no object is made
    per message."""

    @cython.locals(end=cython.Py_ssize_t)
    def __init__(self, data: bytes, count: int) -> None:
        """Raise :class:`BadBatch` when ``count`` members cannot fit in ``data`` at all
        (none is read when it is not positive)."""
        end = len(data)
        if count > end // MIN_MEMBER_BYTES:
            raise BadBatch(
                f"declares {count} messages in {end} bytes,"
                f" room for at most {end // MIN_MEMBER_BYTES}"
            )
        self.data = data
        self.count = max(count, 0)
        self.index = -1
        self.single = None
        self.start = self.stop = 0
        self._reading = MemberMetadata()

    @cython.ccall
    @cython.returns(cython.bint)
    @cython.exceptval(-1, check=False)
    @cython.locals(data=bytes, end=cython.Py_ssize_t, pos=cython.Py_ssize_t)
    @cython.locals(index=cython.Py_ssize_t, size=cython.Py_ssize_t, single=MemberMetadata)
    @cython.locals(payload_size=cython.int)
    def next(self) -> cython.bint:
        """Read the next message; False after the last. Raise :class:`BadBatch` where a
        damaged batch stops."""
        data = self.data
        end = len(data)
        pos = self.stop
        index = self.index + 1
        if index >= self.count:
            return False
        if end - pos < 4:
            raise BadBatch(f"batch ends after {index} of {self.count} messages")
        size = u32(data, pos)
        pos += 4
        if size > end - pos:
            raise BadBatch(f"metadata of message {index} overruns the batch")
        single = self._reading
        if not single.reread(data, pos, pos + size):  # the generated class reads the rest
            try:
                generated = SingleMessageMetadata.FromString(data[pos : pos + size])
            except DecodeError as exc:
                raise BadBatch(f"undecodable metadata of message {index}: {exc}") from None
            single = member_from_generated(generated)
        if not single.has(_PAYLOAD_SIZE):
            raise BadBatch(f"metadata of message {index} lacks its required payload_size")
        pos += size
        payload_size = single.payload_size
        if payload_size < 0 or payload_size > end - pos:
            raise BadBatch(f"payload of message {index} overruns the batch")
        self.index = index
        self.single = single
        self.start = pos
        self.stop = pos + cython.cast(cython.Py_ssize_t, payload_size)
        return True
