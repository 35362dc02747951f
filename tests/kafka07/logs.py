"""Topic partitions as append-only byte logs, with the 0.7 LogManager's rules.

Offsets are byte positions in the log. What the broker does for each request follows
``kafka.server.KafkaRequestHandlers`` and ``kafka.log.{LogManager, Log}`` of 0.7:

- a partition outside ``[0, partitions)`` raises :class:`InvalidPartition` (FETCH turns it
  into the WrongPartition code; PRODUCE and OFFSETS let it close the connection);
- a topic never produced to has no log: FETCH answers an empty set with NoError, OFFSETS
  answers ``[0]`` for latest/earliest and nothing for a time;
- a FETCH offset outside ``[0, end]`` raises :class:`OffsetOutOfRange`;
- a FETCH returns at most ``max_size`` raw log bytes from the offset, whatever message
  boundary that cuts;
- a produced set with a bad CRC raises :class:`InvalidMessage` before anything is stored,
  and a partial trailing message is not stored (``validBytes``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tests.kafka07.messages import split_messages
from tests.kafka07.protocol import EARLIEST_TIME, LATEST_TIME


class InvalidPartition(Exception):
    pass


class OffsetOutOfRange(Exception):
    pass


class InvalidMessage(Exception):
    pass


@dataclass
class Log:
    data: bytearray = field(default_factory=bytearray)
    modified_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    def append(self, messages: bytes) -> int:
        """Store the complete messages of a produced set; return the bytes stored."""
        raw, tail = split_messages(messages)
        if not all(message.crc_ok for message in raw):
            raise InvalidMessage("a produced message fails its CRC")
        valid = len(messages) - tail
        self.data += messages[:valid]
        self.modified_ms = int(time.time() * 1000)
        return valid

    def read(self, offset: int, max_size: int) -> bytes:
        if offset < 0 or offset > len(self.data):
            raise OffsetOutOfRange(f"offset {offset} outside [0, {len(self.data)}]")
        return bytes(self.data[offset : offset + max(max_size, 0)])

    def offsets_before(self, when: int, max_offsets: int) -> list[int]:
        """Log.getOffsetsBefore for one segment starting at 0: newest first."""
        now_ms = int(time.time() * 1000)
        candidates = [(0, self.modified_ms)]
        if self.data:
            candidates.append((len(self.data), now_ms))
        if when == LATEST_TIME:
            start = len(candidates) - 1
        elif when == EARLIEST_TIME:
            start = 0
        else:
            start = len(candidates) - 1
            while start >= 0 and candidates[start][1] > when:
                start -= 1
        count = min(max_offsets, start + 1)
        return [candidates[start - j][0] for j in range(max(count, 0))]


@dataclass
class LogManager:
    default_partitions: int = 1  # num.partitions
    partitions: dict[str, int] = field(default_factory=dict)  # topic.partition.count.map
    logs: dict[tuple[str, int], Log] = field(default_factory=dict)

    def check_partition(self, topic: str, partition: int) -> None:
        count = self.partitions.get(topic, self.default_partitions)
        if partition < 0 or partition >= count:
            raise InvalidPartition(f"wrong partition {partition} of {topic} (0..{count - 1})")

    def get(self, topic: str, partition: int) -> Log | None:
        self.check_partition(topic, partition)
        return self.logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int) -> Log:
        self.check_partition(topic, partition)
        return self.logs.setdefault((topic, partition), Log())

    def offsets(self, topic: str, partition: int, when: int, max_offsets: int) -> list[int]:
        log = self.get(topic, partition)
        if log is not None:
            return log.offsets_before(when, max_offsets)
        return [0] if when in (LATEST_TIME, EARLIEST_TIME) else []
