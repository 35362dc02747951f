"""Filling row columns from what a 0.7 frame carries: its parts and its message sets.

A frame row summarises its parts (topic, partition, offset and max size where they agree,
the parts of a MULTI* frame in ``info``) and its messages (count, CRC verdict, codec);
each message becomes a `messages` row repeating the frame's identity columns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from pwcap.decode.api import Row
from pwcap.decode.kafka07.messages import MessageSet
from pwcap.decode.kafka07.wire import (
    EARLIEST_TIME,
    FETCH,
    LATEST_TIME,
    MULTIFETCH,
    MULTIPRODUCE,
    OFFSETS,
    Part,
)
from pwcap.tables.schema import kept_payload

MAX_INFO_PARTS = 8  # parts of a MULTI* frame listed in `info`
_TIMES = {LATEST_TIME: "latest", EARLIEST_TIME: "earliest"}
_FRAME_COLUMNS = ("ts", "capture", "conn_id", "direction", "protocol", "stream_offset", "command")
_sha256 = hashlib.sha256

Sets = list[tuple[Part | None, MessageSet]]  # each set with the part it belongs to, if known


def emit_messages(emit: Callable[[Row], None], row: Row, sets: Sets, payloads: bool) -> None:
    """One `messages` row per message of the frame ``row`` (payload bytes only when
    ``payloads``); then the frame's ``num_messages``, ``checksum_ok`` and ``compression``
    (when every message shares one)."""
    count = 0
    all_ok = True
    codecs = set()
    frame = {column: row[column] for column in _FRAME_COLUMNS}
    for part, message_set in sets:
        base = {
            **frame,
            "topic": part.topic if part is not None else None,
            "partition": part.partition if part is not None else None,
        }
        for message in message_set.messages:
            payload = message.payload
            out = {
                **base,
                "offset": message.offset,
                "magic": message.magic,
                "compression": message.compression,
                "checksum_ok": message.checksum_ok,
                "batch_index": message.batch_index,
                "batch_size": message.batch_size,
            }
            if payload is not None:
                out["payload_size"] = len(payload)
                out["payload_sha256"] = _sha256(payload).hexdigest()
                if payloads:
                    out["payload"] = kept_payload(payload)
            emit(out)
            all_ok = all_ok and message.checksum_ok
            codecs.add(message.compression)
        count += len(message_set.messages)
    row["num_messages"] = count
    if count:
        row["checksum_ok"] = all_ok
    if len(codecs) == 1:
        row["compression"] = codecs.pop()


def describe_parts(row: Row, parts: list[Part], request_type: int) -> None:
    """Topic, partition, offset and max size where the parts agree; MULTI* parts in info."""
    if not parts:
        return
    first = parts[0]
    if all(p.topic == first.topic for p in parts):
        row["topic"] = first.topic
    if all(p.partition == first.partition for p in parts):
        row["partition"] = first.partition
    if first.kind == FETCH and len(parts) == 1:
        row["offset"] = first.value
        row["max_size"] = first.limit
    if first.kind == OFFSETS:
        add_info(row, f"time={_TIMES.get(first.value, first.value)} max_offsets={first.limit}")
    if request_type in (MULTIFETCH, MULTIPRODUCE):
        listed = [_part_text(p) for p in parts[:MAX_INFO_PARTS]]
        if len(parts) > MAX_INFO_PARTS:
            listed.append(f"+{len(parts) - MAX_INFO_PARTS} more")
        add_info(row, f"parts={len(parts)}: " + ", ".join(listed))


def add_info(row: Row, text: str) -> None:
    info = row.get("info")
    row["info"] = f"{info}; {text}" if info else text


def _part_text(part: Part) -> str:
    if part.kind == FETCH:
        return f"{part.topic}:{part.partition}@{part.value}/{part.limit}"
    return f"{part.topic}:{part.partition} {part.end - part.start}B"
