"""Splitting an uncompressed batch payload into its messages.

A batch is a run of ``[size u32][SingleMessageMetadata][payload_size bytes]``, one per
message; the entry's ``num_messages_in_batch`` says how many.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cython
from google.protobuf.message import DecodeError

from ..wire import VARINT, field_number
from ._pb.pulsar_api_pb2 import SingleMessageMetadata

if cython.compiled:  # the C declarations (metadata.pxd): C calls and C fields
    from cython.cimports.pwcap.decode.pulsar.metadata import (
        MemberMetadata,
        member_from_generated,
        read_single,
    )
else:
    from .metadata import MemberMetadata, member_from_generated, read_single

_U32 = struct.Struct(">I")
# A member's one required field, by number from the schema (a C global when compiled).
_PAYLOAD_SIZE = cython.declare(
    cython.int, field_number(SingleMessageMetadata, "payload_size", VARINT)
)
# The smallest member: its 4-byte size and a SingleMessageMetadata holding only the required
# payload_size (one tag byte, one varint byte), with an empty payload.
MIN_MEMBER_BYTES = 6


BatchMember = tuple[MemberMetadata, memoryview]


class BadBatch(Exception):
    """The batch breaks off: the messages before the damage were yielded already."""


@cython.locals(single=MemberMetadata)
def split_batch(data: bytes | memoryview, count: int) -> Iterator[BatchMember]:
    """Yield ``(metadata, payload)`` of each of the ``count`` messages, one at a time: a
    batch of a million bytes can hold a hundred thousand empty messages, and their rows
    leave for Arrow as they come. Raise :class:`BadBatch` where a damaged batch stops,
    and before the first message when ``count`` members cannot fit in the bytes at all."""
    view = memoryview(data)
    end = len(view)
    if count > end // MIN_MEMBER_BYTES:
        raise BadBatch(
            f"declares {count} messages in {end} bytes, room for at most {end // MIN_MEMBER_BYTES}"
        )
    raw = bytes(view)  # the wire reader takes bytes: one copy of the batch
    parse = SingleMessageMetadata.FromString
    unpack = _U32.unpack_from
    pos = 0
    for index in range(count):
        if end - pos < 4:
            raise BadBatch(f"batch ends after {index} of {count} messages")
        (size,) = unpack(view, pos)
        pos += 4
        if pos + size > end:
            raise BadBatch(f"metadata of message {index} overruns the batch")
        single = read_single(raw, pos, pos + size)
        if single is None:  # not the common shape: the generated class reads it
            try:
                generated = parse(view[pos : pos + size])
            except DecodeError as exc:
                raise BadBatch(f"undecodable metadata of message {index}: {exc}") from None
            single = member_from_generated(generated)
        if not single.has(_PAYLOAD_SIZE):
            raise BadBatch(f"metadata of message {index} lacks its required payload_size")
        pos += size
        payload_end = pos + single.payload_size
        if single.payload_size < 0 or payload_end > end:
            raise BadBatch(f"payload of message {index} overruns the batch")
        yield single, view[pos:payload_end]
        pos = payload_end
