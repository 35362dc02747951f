"""Splitting an uncompressed batch payload into its messages.

A batch is a run of ``[size u32][SingleMessageMetadata][payload_size bytes]``, one per
message; the entry's ``num_messages_in_batch`` says how many.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError
from pwcap.decode.pulsar._pb.pulsar_api_pb2 import SingleMessageMetadata

_U32 = struct.Struct(">I")


BatchMember = tuple[SingleMessageMetadata, memoryview]


def split_batch(data: bytes | memoryview, count: int) -> tuple[list[BatchMember], str | None]:
    """Return ``(metadata, payload)`` of each of the ``count`` messages, and what went wrong.

    A damaged batch still yields the messages before the damage; the second item then
    explains where it stopped (it is None for a sound batch).
    """
    view = memoryview(data)
    end = len(view)
    parse = SingleMessageMetadata.FromString
    unpack = _U32.unpack_from
    pos = 0
    out = []
    for index in range(count):
        if end - pos < 4:
            return out, f"batch ends after {index} of {count} messages"
        (size,) = unpack(view, pos)
        pos += 4
        if pos + size > end:
            return out, f"metadata of message {index} overruns the batch"
        try:
            single = parse(view[pos : pos + size])
        except DecodeError as exc:
            return out, f"undecodable metadata of message {index}: {exc}"
        pos += size
        payload_end = pos + single.payload_size
        if single.payload_size < 0 or payload_end > end:
            return out, f"payload of message {index} overruns the batch"
        out.append((single, view[pos:payload_end]))
        pos = payload_end
    return out, None
