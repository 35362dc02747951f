"""Reassembly of chunked messages, with a bound on the bytes held for incomplete ones.

A producer splits a message too large for one entry into ``num_chunks_from_msg`` entries
sharing a ``uuid``; each chunk is its own SEND (and MESSAGE). The chunks of one message
travel in order on one connection, so only the next expected chunk is accepted: a
missing one makes the message unrecoverable and it is dropped. Every message given up
(a chunk missing, or evicted to respect the memory bound) is reported, never silent.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

Report = Callable[[str, str], None]  # anomaly kind, detail
# Incomplete messages held at once, however small: chunks of a few bytes each, under new
# uuids, would otherwise pile up without reaching the bound on bytes.
MAX_PENDING_MESSAGES = 10_000


class _Pending:
    __slots__ = ("next_id", "parts", "size")

    def __init__(self) -> None:
        self.next_id = 0
        self.parts: list[bytes] = []
        self.size = 0


class ChunkAssembler:
    """Collects chunk payloads per message until the last one arrives."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._held = 0
        self._pending: dict[Hashable, _Pending] = {}

    def add(
        self, key: Hashable, chunk_id: int, num_chunks: int, data: bytes, report: Report
    ) -> bytes | None:
        """Take one chunk; return the whole message when this chunk completes it."""
        pending = self._pending.get(key)
        if chunk_id == 0:
            if pending is not None:
                self._forget(key, pending)
                report("chunk_missing", f"message restarted after {pending.next_id} chunks")
            pending = _Pending()
            self._pending[key] = pending
        elif pending is None:
            report("chunk_missing", f"chunk {chunk_id} of {num_chunks} without the earlier ones")
            return None
        elif chunk_id != pending.next_id:
            self._forget(key, pending)
            report("chunk_missing", f"chunk {chunk_id} of {num_chunks} after {pending.next_id}")
            return None
        pending.parts.append(data)
        pending.size += len(data)
        pending.next_id += 1
        self._held += len(data)
        if pending.next_id >= num_chunks:
            self._pending.pop(key)
            self._held -= pending.size
            return b"".join(pending.parts)
        self._evict(report)
        return None

    def _forget(self, key: Hashable, pending: _Pending) -> None:
        del self._pending[key]
        self._held -= pending.size

    def _evict(self, report: Report) -> None:
        """Drop the oldest incomplete messages until the held bytes and the number of
        messages fit their bounds."""
        while self._pending:
            if self._held > self._max_bytes:
                bound = f"the {self._max_bytes}-byte bound on pending chunks"
            elif len(self._pending) > MAX_PENDING_MESSAGES:
                bound = f"the bound of {MAX_PENDING_MESSAGES} incomplete messages"
            else:
                return
            key = next(iter(self._pending))
            pending = self._pending[key]
            self._forget(key, pending)
            report(
                "chunk_evicted",
                f"incomplete chunked message of {pending.size} bytes dropped: over {bound}",
            )
