"""Filling row columns from what a 0.7 frame carries: its parts and its message sets.

A frame row summarises its parts (topic, partition, offset and max size where they agree,
the parts of a MULTI* frame in ``info``) and its messages (count, CRC verdict, codec);
each message becomes a `messages` row repeating the frame's identity columns.
"""

from __future__ import annotations

import hashlib

from ...tables.columns import ColumnBuffer, pairs
from ...tables.schema import kept_payload, positions
from ..api import FRAME_OF_MESSAGE
from .messages import MessageSet
from .wire import (
    EARLIEST_TIME,
    FETCH,
    LATEST_TIME,
    MULTIFETCH,
    MULTIPRODUCE,
    OFFSETS,
    Part,
)

MAX_INFO_PARTS = 8  # parts of a MULTI* frame listed in `info`
_TIMES = {LATEST_TIME: "latest", EARLIEST_TIME: "earliest"}


_OF_FRAME = pairs("frames", "messages", FRAME_OF_MESSAGE)  # what each message repeats
TOPIC, PARTITION, OFFSET, MAX_SIZE, INFO, NUM_MESSAGES, CHECKSUM_OK, COMPRESSION = positions(
    "frames",
    "topic",
    "partition",
    "offset",
    "max_size",
    "info",
    "num_messages",
    "checksum_ok",
    "compression",
)
(
    M_TOPIC,
    M_PARTITION,
    M_OFFSET,
    M_MAGIC,
    M_COMPRESSION,
    M_CHECKSUM_OK,
    M_BATCH_INDEX,
    M_BATCH_SIZE,
    M_PAYLOAD_SIZE,
    M_PAYLOAD_SHA256,
    M_PAYLOAD,
) = positions(
    "messages",
    "topic",
    "partition",
    "offset",
    "magic",
    "compression",
    "checksum_ok",
    "batch_index",
    "batch_size",
    "payload_size",
    "payload_sha256",
    "payload",
)
_sha256 = hashlib.sha256

Sets = list[tuple[Part | None, MessageSet]]  # each set with the part it belongs to, if known


def emit_messages(messages: ColumnBuffer, frame: ColumnBuffer, sets: Sets, payloads: bool) -> None:
    """One `messages` row per message of the frame being built in ``frame`` (payload
    bytes only when ``payloads``), built as the sets are walked; then the frame's
    ``num_messages``, ``checksum_ok`` and ``compression`` (when every message shares one)."""
    count = 0
    all_ok = True
    codecs = set()
    for part, message_set in sets:
        topic = part.topic if part is not None else None
        partition = part.partition if part is not None else None
        for message in message_set.messages():
            messages.copy_columns(frame, _OF_FRAME)
            messages.set(M_TOPIC, topic)
            messages.set(M_PARTITION, partition)
            messages.set(M_OFFSET, message.offset)
            messages.set(M_MAGIC, message.magic)
            messages.set(M_COMPRESSION, message.compression)
            messages.set(M_CHECKSUM_OK, message.checksum_ok)
            messages.set(M_BATCH_INDEX, message.batch_index)
            messages.set(M_BATCH_SIZE, message.batch_size)
            payload = message.payload
            if payload is not None:
                messages.set(M_PAYLOAD_SIZE, len(payload))
                messages.set(M_PAYLOAD_SHA256, _sha256(payload).hexdigest())
                if payloads:
                    messages.set(M_PAYLOAD, kept_payload(payload))
            messages.end_row()
            all_ok = all_ok and message.checksum_ok
            codecs.add(message.compression)
            count += 1
    frame.set(NUM_MESSAGES, count)
    if count:
        frame.set(CHECKSUM_OK, all_ok)
    if len(codecs) == 1:
        frame.set(COMPRESSION, codecs.pop())


def describe_parts(frame: ColumnBuffer, parts: list[Part], request_type: int) -> None:
    """Topic, partition, offset and max size where the parts agree; MULTI* parts in info."""
    if not parts:
        return
    first = parts[0]
    if all(p.topic == first.topic for p in parts):
        frame.set(TOPIC, first.topic)
    if all(p.partition == first.partition for p in parts):
        frame.set(PARTITION, first.partition)
    if first.kind == FETCH and len(parts) == 1:
        frame.set(OFFSET, first.value)
        frame.set(MAX_SIZE, first.limit)
    if first.kind == OFFSETS:
        add_info(frame, f"time={_TIMES.get(first.value, first.value)} max_offsets={first.limit}")
    if request_type in (MULTIFETCH, MULTIPRODUCE):
        listed = [_part_text(p) for p in parts[:MAX_INFO_PARTS]]
        if len(parts) > MAX_INFO_PARTS:
            listed.append(f"+{len(parts) - MAX_INFO_PARTS} more")
        add_info(frame, f"parts={len(parts)}: " + ", ".join(listed))


def add_info(frame: ColumnBuffer, text: str) -> None:
    """Add ``text`` to the `info` of the frame being built."""
    info = frame.get(INFO)
    frame.set(INFO, f"{info}; {text}" if info else text)


def _part_text(part: Part) -> str:
    if part.kind == FETCH:
        return f"{part.topic}:{part.partition}@{part.value}/{part.limit}"
    return f"{part.topic}:{part.partition} {part.end - part.start}B"
