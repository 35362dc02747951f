"""Split a captured Kafka 0.7 TCP stream into its length-prefixed frames.

Used to check a capture against the broker journal and to name the frames a derived
capture damages. Every 0.7 request and response is ``[int32 length][length bytes]``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class WireFrame:
    offset: int  # in the stream, from the byte after the SYN
    size: int  # with the length prefix
    body: bytes  # without it


def split_frames(stream: bytes) -> list[WireFrame]:
    """Every complete frame of a stream captured from its start."""
    frames = []
    position = 0
    while position + 4 <= len(stream):
        (length,) = struct.unpack_from(">i", stream, position)
        end = position + 4 + length
        if end > len(stream):
            break
        frames.append(WireFrame(position, end - position, stream[position + 4 : end]))
        position = end
    return frames


def journal_streams(journal: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Journal rows per (sender, receiver), in the order their frames crossed the wire."""
    streams: dict[tuple[str, str], list[dict]] = {}
    for row in journal:
        if row["dir"] == "close":
            continue
        key = (row["client"], row["broker"])
        if row["dir"] == "b2c":
            key = (row["broker"], row["client"])
        streams.setdefault(key, []).append(row)
    return streams


def frames_touched(
    streams: dict[tuple[str, str], bytes],
    journal: list[dict],
    client: str,
    server: str,
    direction: str,
    offset: int,
    length: int,
) -> list[dict[str, object]]:
    """The journal frames whose bytes overlap ``[offset, offset + length)`` of one stream."""
    key = (client, server) if direction == "c2b" else (server, client)
    rows = journal_streams(journal)[key]
    touched = []
    for index, (frame, row) in enumerate(zip(split_frames(streams[key]), rows, strict=True)):
        if frame.offset < offset + length and offset < frame.offset + frame.size:
            touched.append(
                {"conn": row["conn"], "dir": direction, "frame_index": index, "type": row["type"]}
            )
    return touched
