"""Per-connection protocol state: names behind ids, request/response pairing, permits.

Pairing follows what the protocol guarantees, not what one client happens to do:
request ids are not dense (a client may share one counter across its connections) and
not even unique per connection (the C++ client draws lookup ids from a client-wide
counter and producer / consumer request ids from a per-connection one), so a response
is matched by its request id *and* its type against the client's outstanding requests
(:data:`commands.ANSWERS` says which requests each response type can answer), and the
entry is removed on match.
SEND pairs with its receipt by (producer id, sequence id), ACK with its ACK_RESPONSE by
(consumer id, request id), and PING / CONNECT / AUTH_CHALLENGE with the other side's next
PONG / CONNECTED / AUTH_RESPONSE in order.

A response without its request is only an anomaly when the request could have been
seen: the connection was captured from its SYN and nothing was lost since.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import cython
from pwcap.decode.pulsar import commands as c

MAX_PENDING = 100_000  # outstanding requests kept per table before the oldest are dropped
# (row, direction, final) -> False for a response whose request was not seen. A response
# that is not ``final`` (PRODUCER_SUCCESS with ``producer_ready`` false: another follows
# once the producer gets access) leaves its request outstanding.
Pairer = Callable[[dict[str, Any], int, bool], bool]
MAX_SAME_ID = 8  # outstanding requests sharing one request id (one per id family is normal)


# The columns a producer / consumer id stands for, copied onto every row with that id.
PRODUCER_NAMES = ("topic", "producer_name")
CONSUMER_NAMES = ("topic", "subscription", "consumer_name", "sub_type")


class Consumer:
    __slots__ = ("names", "permits")

    def __init__(self, row: dict[str, Any], permits: int | None) -> None:
        # Kept as the dict merged into rows: one C-level update per row.
        self.names = _present(row, CONSUMER_NAMES)
        self.permits = permits  # None while the balance is unknown


class Producer:
    __slots__ = ("names",)

    def __init__(self, row: dict[str, Any]) -> None:
        self.names = _present(row, PRODUCER_NAMES)

    def rename(self, name: str) -> None:
        """The broker chose the name (PRODUCER_SUCCESS)."""
        self.names["producer_name"] = name


def _present(row: dict[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    return {column: row[column] for column in columns if row.get(column) is not None}


class Request:
    """An outstanding request: what a matching response inherits."""

    __slots__ = ("consumer_id", "name", "producer_id", "request_id", "topic", "ts")

    def __init__(self, row: dict[str, Any]) -> None:
        self.name = row["command"]
        self.request_id = row["request_id"]
        self.ts = row["ts"]
        self.topic = row.get("topic")
        self.producer_id = row.get("producer_id")
        self.consumer_id = row.get("consumer_id")


class ConnectionState:
    """Everything one connection's earlier frames tell about its later ones."""

    def __init__(self, complete: bool) -> None:
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self._requests: dict[int, list[Request]] = {}  # request_id -> client requests
        self._sends: dict[tuple[int, int], list[int]] = {}  # (producer_id, sequence_id)
        self._acks: dict[tuple[int, int], int] = {}  # (consumer_id, request_id) -> ts
        self._in_order: dict[tuple[str, int], deque[tuple[str, int]]] = {}
        # True while every byte of both directions since the SYN has been decoded.
        self.complete = complete
        # Pairing role -> how a row of that role is recorded or matched.
        self.pairers: dict[str, Pairer] = {
            c.REQUEST: self._pair_request,
            c.RESPONSE: self._pair_response,
            c.SEND: self._pair_send,
            c.RECEIPT: self._pair_receipt,
            c.ACK: self._pair_ack,
            c.ACK_RESPONSE: self._pair_ack_response,
            c.PING: self._in_order_request(c.PING),
            c.CONNECT: self._in_order_request(c.CONNECT),
            c.CHALLENGE: self._in_order_request(c.CHALLENGE),
            c.PONG: self._in_order_response(c.PING),
            c.CONNECTED: self._in_order_response(c.CONNECT),
            c.CHALLENGE_REPLY: self._in_order_response(c.CHALLENGE),
        }

    def lose_sync(self) -> None:
        """Bytes went missing: pairings and permit balances can no longer be trusted."""
        self.complete = False
        for consumer in self.consumers.values():
            consumer.permits = None

    def swap_directions(self) -> None:
        """The roles were reversed: re-key what was recorded under the wrong directions.

        Before the roles are settled only commands either side may send were seen; the
        CLOSE_PRODUCER / CLOSE_CONSUMER among them that were taken for client requests
        came from the broker, which expects no answer to them.
        """
        self._requests.clear()
        self._in_order = {(role, 1 - d): queue for (role, d), queue in self._in_order.items()}

    # -- names ---------------------------------------------------------------------------

    def add_producer(self, row: dict[str, Any]) -> None:
        self.producers[row["producer_id"]] = Producer(row)

    def add_consumer(self, row: dict[str, Any]) -> None:
        self.consumers[row["consumer_id"]] = Consumer(row, 0 if self.complete else None)

    def fill_names(self, row: dict[str, Any], named: bool) -> None:
        """Copy topic / subscription / names of the ids the row carries.

        ``named``: the row may already hold some of those columns (from the command
        itself or the request it answers); those values win over the state's.
        """
        producer_id = row.get("producer_id")
        if producer_id is not None:
            producer = self.producers.get(producer_id)
            if producer is not None:
                _merge(row, producer.names, named)
        consumer_id = row.get("consumer_id")
        if consumer_id is not None:
            consumer = self.consumers.get(consumer_id)
            if consumer is not None:
                _merge(row, consumer.names, named)

    # -- permits -------------------------------------------------------------------------

    def grant(self, consumer_id: int, permits: int) -> None:
        consumer = self.consumers.get(consumer_id)
        if consumer is not None and consumer.permits is not None:
            consumer.permits += permits

    @cython.locals(consumers=dict)
    def spend(self, consumer_id: int, messages: int) -> int | None:
        """Charge a delivered entry; return the balance before it (None if unknown)."""
        consumers = self.consumers
        consumer = consumers.get(consumer_id)
        if consumer is None or consumer.permits is None:
            return None
        before = consumer.permits
        consumer.permits = before - messages
        return before

    # -- pairing -------------------------------------------------------------------------

    def _pair_request(self, row: dict[str, Any], direction: int, final: bool) -> bool:
        if direction == 0:  # the broker's CLOSE_PRODUCER / CLOSE_CONSUMER expect no answer
            self._add_request(Request(row))
        return True

    # Typed locals (compiled): every SEND and receipt passes here, and the operations on
    # a dict or list known as such are C calls, not attribute lookups and method calls.
    @cython.locals(row=dict, sends=dict, waiting=list)
    def _pair_send(self, row: dict[str, Any], direction: int, final: bool) -> bool:
        key = (row["producer_id"], row["sequence_id"])
        sends = self._sends
        waiting = sends.get(key)
        if waiting is None:
            if len(sends) >= MAX_PENDING:
                _drop_oldest(sends, self)
            sends[key] = [row["ts"]]
        else:
            waiting.append(row["ts"])
        return True

    @cython.locals(row=dict, sends=dict, waiting=list)
    def _pair_receipt(self, row: dict[str, Any], direction: int, final: bool) -> bool:
        key = (row["producer_id"], row["sequence_id"])
        sends = self._sends
        waiting = sends.get(key)
        if waiting is None:
            return False
        row["answers"] = "SEND"
        row["request_ts"] = waiting.pop(0)
        if not waiting:
            del sends[key]
        return True

    @cython.locals(row=dict)
    def _pair_ack(self, row: dict[str, Any], direction: int, final: bool) -> bool:
        request_id = row.get("request_id")
        if request_id is not None:
            _put(self._acks, (row["consumer_id"], request_id), row["ts"], self)
        return True

    def _pair_ack_response(self, row: dict[str, Any], direction: int, final: bool) -> bool:
        request_id = row.get("request_id")
        if request_id is None:
            return True
        ts = self._acks.pop((row["consumer_id"], request_id), None)
        if ts is None:
            return False
        row["answers"] = "ACK"
        row["request_ts"] = ts
        return True

    def _add_request(self, request: Request) -> None:
        request_id = request.request_id
        waiting = self._requests.get(request_id)
        if waiting is None:
            _put(self._requests, request_id, [request], self)
            return
        if len(waiting) >= MAX_SAME_ID:
            del waiting[0]
            self.complete = False
        waiting.append(request)

    def _pair_response(self, row: dict[str, Any], direction: int, final: bool) -> bool:
        request = None
        request_id = row["request_id"]
        waiting = self._requests.get(request_id) if direction == 1 else None
        if waiting:
            ranks = c.ANSWER_RANKS[row["command"]]
            best = None
            best_rank = len(ranks)
            for index, candidate in enumerate(waiting):
                rank = ranks.get(candidate.name, best_rank)
                if rank < best_rank:
                    best, best_rank = index, rank
            if best is not None:
                request = waiting.pop(best) if final else waiting[best]
                if not waiting:
                    del self._requests[request_id]
        if request is None:
            # A broker refusing CONNECT answers with ERROR and no meaningful request id.
            return row["command"] == "ERROR" and self._take_in_order(c.CONNECT, 1 - direction, row)
        row["answers"] = request.name
        row["request_ts"] = request.ts
        if request.topic is not None:
            row.setdefault("topic", request.topic)
        if request.producer_id is not None:
            row.setdefault("producer_id", request.producer_id)
        if request.consumer_id is not None:
            row.setdefault("consumer_id", request.consumer_id)
        return True

    def _in_order_request(self, role: str) -> Pairer:
        def record(row: dict[str, Any], direction: int, final: bool) -> bool:
            queue = self._in_order.setdefault((role, direction), deque(maxlen=MAX_PENDING))
            queue.append((row["command"], row["ts"]))
            return True

        return record

    def _in_order_response(self, request_role: str) -> Pairer:
        def answer(row: dict[str, Any], direction: int, final: bool) -> bool:
            return self._take_in_order(request_role, 1 - direction, row)

        return answer

    def _take_in_order(self, request_role: str, direction: int, row: dict[str, Any]) -> bool:
        queue = self._in_order.get((request_role, direction))
        if not queue:
            return False
        row["answers"], row["request_ts"] = queue.popleft()
        return True


def _merge(row: dict[str, Any], names: dict[str, Any], keep_row_values: bool) -> None:
    if keep_row_values:
        for column, value in names.items():
            row.setdefault(column, value)
    else:
        row.update(names)


def _put(table: dict, key: Any, value: Any, state: ConnectionState) -> None:
    """Insert, dropping the oldest entry when the table is full (pairing then unreliable)."""
    if len(table) >= MAX_PENDING:
        _drop_oldest(table, state)
    table[key] = value


def _drop_oldest(table: dict, state: ConnectionState) -> None:
    del table[next(iter(table))]
    state.complete = False
