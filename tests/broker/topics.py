"""Topic storage and subscription dispatch, with permit accounting as a real broker does.

An entry (one SEND: a single message, a whole batch, or one chunk) spends as many permits
as it carries messages, and is only dispatched when the consumer has that many left.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb

SubType = pb.CommandSubscribe.SubType
SHARED_TYPES = {SubType.Value("Shared"), SubType.Value("Key_Shared")}


@dataclass(slots=True)
class Entry:
    entry_id: int
    num_messages: int
    stored: bytes  # payload section from magic 0x0e01 on, exactly as the producer sent it
    broker_timestamp: int
    first_index: int  # broker index of the entry's first message (for entry metadata)


@dataclass
class Topic:
    name: str
    ledger_id: int
    entries: list[Entry] = field(default_factory=list)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    next_index: int = 0

    def append(self, num_messages: int, stored: bytes, now_ms: int) -> Entry:
        entry = Entry(len(self.entries), num_messages, stored, now_ms, self.next_index)
        self.entries.append(entry)
        self.next_index += num_messages
        for subscription in self.subscriptions.values():
            subscription.dispatch()
        return entry


# Delivers one entry to a consumer: (consumer, entry, redelivery_count).
Deliver = Callable[["Consumer", Entry, int], None]


@dataclass(eq=False)
class Consumer:
    consumer_id: int
    name: str
    deliver: Deliver
    permits: int = 0


@dataclass
class Subscription:
    """A cursor over a topic plus what is in flight to which consumer."""

    topic: Topic
    name: str
    sub_type: int
    cursor: int = 0
    consumers: list[Consumer] = field(default_factory=list)
    replay: set[int] = field(default_factory=set)
    pending: dict[int, Consumer] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)
    dispatch_count: dict[int, int] = field(default_factory=dict)
    _turn: itertools.count = field(default_factory=itertools.count)

    def add(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)
        self.dispatch()

    def remove(self, consumer: Consumer) -> None:
        """A closed consumer's unacknowledged entries go back to be dispatched again."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
        self.redeliver(consumer, None)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.permits += permits
        self.dispatch()

    def ack(self, message_ids: list[pb.MessageIdData], cumulative: bool) -> None:
        for message_id in message_ids:
            if any(message_id.ack_set):  # part of a batch is still unacknowledged
                continue
            entry_ids = range(message_id.entryId + 1) if cumulative else [message_id.entryId]
            for entry_id in entry_ids:
                self.acked.add(entry_id)
                self.pending.pop(entry_id, None)
                self.replay.discard(entry_id)

    def redeliver(self, consumer: Consumer, entry_ids: list[int] | None) -> None:
        """Put ``entry_ids`` (all of the consumer's pending entries when None) up for dispatch."""
        candidates = entry_ids if entry_ids is not None else list(self.pending)
        for entry_id in candidates:
            if self.pending.get(entry_id) is consumer:
                del self.pending[entry_id]
                self.replay.add(entry_id)
        self.dispatch()

    def seek(self, entry_id: int) -> None:
        self.cursor = entry_id
        self.replay.clear()
        self.pending.clear()
        self.acked = {e for e in self.acked if e < entry_id}
        # Re-reading after a seek is a fresh delivery, not a redelivery.
        self.dispatch_count = {e: n for e, n in self.dispatch_count.items() if e < entry_id}
        self.dispatch()

    def _next_entry(self) -> int | None:
        if self.replay:
            return min(self.replay)
        while self.cursor < len(self.topic.entries) and self.cursor in self.acked:
            self.cursor += 1
        return self.cursor if self.cursor < len(self.topic.entries) else None

    def _pick(self, num_messages: int) -> Consumer | None:
        if not self.consumers:
            return None
        if self.sub_type not in SHARED_TYPES:
            active = self.consumers[0]
            return active if active.permits >= num_messages else None
        for _ in range(len(self.consumers)):
            candidate = self.consumers[next(self._turn) % len(self.consumers)]
            if candidate.permits >= num_messages:
                return candidate
        return None

    def dispatch(self) -> None:
        """Send entries while some consumer holds enough permits for the next one."""
        while (entry_id := self._next_entry()) is not None:
            entry = self.topic.entries[entry_id]
            consumer = self._pick(entry.num_messages)
            if consumer is None:
                return
            if entry_id in self.replay:
                self.replay.discard(entry_id)
            else:
                self.cursor += 1
            consumer.permits -= entry.num_messages
            count = self.dispatch_count.get(entry_id, 0)
            self.dispatch_count[entry_id] = count + 1
            self.pending[entry_id] = consumer
            consumer.deliver(consumer, entry, count)
