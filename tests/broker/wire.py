"""Pulsar framing for the test broker: split a frame into command and payload parts.

A frame is ``total_size(4) command_size(4) command`` optionally followed by a payload
section: ``[0x0e02 bem_size(4) bem] 0x0e01 crc32c(4) metadata_size(4) metadata payload``.
All sizes are big-endian; the CRC covers everything after itself.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
from google.protobuf.message import Message

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb

MAGIC_CRC = b"\x0e\x01"
MAGIC_ENTRY_METADATA = b"\x0e\x02"
U32 = struct.Struct(">I")


@dataclass(slots=True)
class Frame:
    """One decoded frame as the broker saw it."""

    command: pb.BaseCommand
    size: int  # bytes on the wire, including the 4-byte total size
    stored: bytes = b""  # the payload section from magic 0x0e01 on, kept verbatim
    metadata: pb.MessageMetadata | None = None
    checksum_ok: bool | None = None
    entry_metadata: pb.BrokerEntryMetadata | None = None


def parse_frame(body: bytes) -> Frame:
    """Parse everything after the 4-byte total size."""
    (command_size,) = U32.unpack_from(body, 0)
    command = pb.BaseCommand.FromString(body[4 : 4 + command_size])
    frame = Frame(command=command, size=4 + len(body))
    rest = body[4 + command_size :]
    if not rest:
        return frame
    if rest.startswith(MAGIC_ENTRY_METADATA):
        (bem_size,) = U32.unpack_from(rest, 2)
        frame.entry_metadata = pb.BrokerEntryMetadata.FromString(rest[6 : 6 + bem_size])
        rest = rest[6 + bem_size :]
    frame.stored = rest
    if rest.startswith(MAGIC_CRC):
        (expected,) = U32.unpack_from(rest, 2)
        frame.checksum_ok = crc32c.crc32c(rest[6:]) == expected
        (metadata_size,) = U32.unpack_from(rest, 6)
        frame.metadata = pb.MessageMetadata.FromString(rest[10 : 10 + metadata_size])
    return frame


def build_frame(
    command: pb.BaseCommand,
    stored: bytes = b"",
    entry_metadata: pb.BrokerEntryMetadata | None = None,
) -> bytes:
    """Serialise a command, optionally followed by broker entry metadata and a payload."""
    encoded = command.SerializeToString()
    section = b""
    if entry_metadata is not None:
        bem = entry_metadata.SerializeToString()
        section = MAGIC_ENTRY_METADATA + U32.pack(len(bem)) + bem
    section += stored
    body = U32.pack(len(encoded)) + encoded + section
    return U32.pack(len(body)) + body


def command_of(kind: int, **fields: object) -> pb.BaseCommand:
    """A BaseCommand of type ``kind`` with its sub-command built from ``fields``."""
    base = pb.BaseCommand(type=kind)
    field = pb.BaseCommand.DESCRIPTOR.fields_by_number[kind]
    getattr(base, field.name).SetInParent()
    for name, value in fields.items():
        target = getattr(base, field.name)
        if isinstance(value, pb.MessageIdData | pb.FeatureFlags):
            getattr(target, name).CopyFrom(value)
        else:
            setattr(target, name, value)
    return base


def sub_command(command: pb.BaseCommand) -> Message | None:
    """The sub-command that the envelope's type selects."""
    field = pb.BaseCommand.DESCRIPTOR.fields_by_number.get(command.type)
    return getattr(command, field.name) if field is not None else None
