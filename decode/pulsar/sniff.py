"""Does a byte string look like Pulsar? Used for detection on any port and for resync."""

from __future__ import annotations

from google.protobuf.message import DecodeError

from .. import MAX_FRAME_SIZE
from ._pb.pulsar_api_pb2 import BaseCommand
from .commands import SPECS
from .framing import HEADER, MIN_COMMAND_SIZE, find_frame_start


def looks_like_command(buf: bytes, start: int, size: int) -> bool:
    """``buf[start:start+size]`` decodes as a BaseCommand of a known type carrying it (read
    through a view: a copy would cost the whole command for garbage refused at its start)."""
    try:
        command = BaseCommand.FromString(memoryview(buf)[start : start + size])
    except DecodeError:
        return False
    if not command.HasField("type"):
        return False
    spec = SPECS.get(command.type)
    return spec is not None and command.HasField(spec.field)


def sniff(data: bytes, max_frame_size: int = MAX_FRAME_SIZE) -> bool:
    """Does ``data`` start with a plausible Pulsar frame whose command decodes?"""
    if len(data) < 8 + MIN_COMMAND_SIZE:
        return False
    total, command_size = HEADER.unpack_from(data, 0)
    if total > max_frame_size or not MIN_COMMAND_SIZE <= command_size <= total - 4:
        return False
    if 8 + command_size > len(data):
        return False
    return looks_like_command(data, 8, command_size)


def contains_frame(data: bytes, max_frame_size: int = MAX_FRAME_SIZE) -> bool:
    """Is there a confirmed Pulsar frame boundary anywhere in ``data``?

    For captures that start mid-connection, where the first bytes are the middle of a
    frame and :func:`sniff` must say no.
    """
    return find_frame_start(data, 0, max_frame_size, looks_like_command).confirmed
