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
from typing import Any

import cython

from ...tables.schema import position
from . import commands as c

if cython.compiled:  # the row builder's C declarations (columns.pxd): its methods are C calls
    from cython.cimports.pwcap.tables.columns import ColumnBuffer
else:
    from ...tables.columns import ColumnBuffer

MAX_PENDING = 100_000  # outstanding requests kept per table before the oldest are dropped
MAX_SAME_ID = 8  # outstanding requests sharing one request id (one per id family is normal)


# The columns a producer / consumer id stands for, copied onto every row with that id.
PRODUCER_NAMES = ("topic", "producer_name")
CONSUMER_NAMES = ("topic", "subscription", "consumer_name", "sub_type")
# The `frames` columns read and written here (C constants when compiled).
TS = cython.declare(cython.Py_ssize_t, position("frames", "ts"))
COMMAND = cython.declare(cython.Py_ssize_t, position("frames", "command"))
REQUEST_ID = cython.declare(cython.Py_ssize_t, position("frames", "request_id"))
PRODUCER_ID = cython.declare(cython.Py_ssize_t, position("frames", "producer_id"))
CONSUMER_ID = cython.declare(cython.Py_ssize_t, position("frames", "consumer_id"))
SEQUENCE_ID = cython.declare(cython.Py_ssize_t, position("frames", "sequence_id"))
TOPIC = cython.declare(cython.Py_ssize_t, position("frames", "topic"))
PRODUCER_NAME = cython.declare(cython.Py_ssize_t, position("frames", "producer_name"))
ANSWERS = cython.declare(cython.Py_ssize_t, position("frames", "answers"))
REQUEST_TS = cython.declare(cython.Py_ssize_t, position("frames", "request_ts"))
# Response -> {request name: preference} (a C global when compiled: a dict known as one).
_ANSWER_RANKS = cython.declare(dict, c.ANSWER_RANKS)
_PRODUCER_NAMES = tuple(position("frames", column) for column in PRODUCER_NAMES)
_CONSUMER_NAMES = tuple(position("frames", column) for column in CONSUMER_NAMES)


class Consumer:
    __slots__ = ("names", "permits")

    def __init__(self, rows: ColumnBuffer, permits: int | None) -> None:
        self.names = _present(rows, _CONSUMER_NAMES)
        self.permits = permits  # None while the balance is unknown


class Producer:
    __slots__ = ("names",)

    def __init__(self, rows: ColumnBuffer) -> None:
        self.names = _present(rows, _PRODUCER_NAMES)

    def rename(self, name: str) -> None:
        """The broker chose the name (PRODUCER_SUCCESS)."""
        self.names[PRODUCER_NAME] = name


@cython.locals(rows=ColumnBuffer)
def _present(rows: ColumnBuffer, columns: tuple[int, ...]) -> dict[int, str]:
    """The names the row being built has: column position -> value, merged into rows."""
    return {column: rows.get(column) for column in columns if rows.has(column)}


# An outstanding request: its command and time, and what a matching response inherits
# (topic, producer id, consumer id). A tuple: one is made per request, and a class
# instance costs more to build.
Request = tuple[str, int, str | None, int | None, int | None]


@cython.locals(rows=ColumnBuffer)
def _request(rows: ColumnBuffer) -> Request:
    """The request whose row is being built."""
    return (
        rows.get(COMMAND),
        rows.get(TS),
        rows.get(TOPIC),
        rows.get(PRODUCER_ID),
        rows.get(CONSUMER_ID),
    )


# Pairing roles (commands.py) by the code a frame's kind hands to ConnectionState.pair:
# the roles matched by id, then the requests answered in order, then their answers.
_BY_ID = (c.REQUEST, c.RESPONSE, c.SEND, c.RECEIPT, c.ACK, c.ACK_RESPONSE)
_ANSWERED_IN_ORDER = {c.PONG: c.PING, c.CONNECTED: c.CONNECT, c.CHALLENGE_REPLY: c.CHALLENGE}
_IN_ORDER = (*_ANSWERED_IN_ORDER.values(), *_ANSWERED_IN_ORDER)
ROLE_CODES: dict[str, int] = {role: code for code, role in enumerate((*_BY_ID, *_IN_ORDER))}
# The same, as C constants when compiled: ConnectionState.pair switches on them.
_REQUEST = cython.declare(cython.int, ROLE_CODES[c.REQUEST])
_RESPONSE = cython.declare(cython.int, ROLE_CODES[c.RESPONSE])
_SEND = cython.declare(cython.int, ROLE_CODES[c.SEND])
_RECEIPT = cython.declare(cython.int, ROLE_CODES[c.RECEIPT])
_ACK = cython.declare(cython.int, ROLE_CODES[c.ACK])
_ACK_RESPONSE = cython.declare(cython.int, ROLE_CODES[c.ACK_RESPONSE])
_FIRST_ANSWER = cython.declare(cython.int, ROLE_CODES[c.PONG])  # the in-order answers from here
# code -> the in-order request role it records or answers
_ORDERED_ROLES = cython.declare(
    tuple,
    tuple(_ANSWERED_IN_ORDER.get(role, role) for role in (*_BY_ID, *_IN_ORDER)),
)


@cython.cclass
class ConnectionState:
    """Everything one connection's earlier frames tell about its later ones.

    Its fields' C types are in ``state.pxd``, where the decoder calls :meth:`pair` and
    :meth:`fill_names` as C."""

    def __init__(self, complete: bool) -> None:
        self.producers = {}  # producer id -> Producer
        self.consumers = {}  # consumer id -> Consumer
        self._requests = {}  # request_id -> client requests (list of Request)
        self._sends = {}  # (producer_id, sequence_id) -> times of the SENDs waiting
        self._acks = {}  # (consumer_id, request_id) -> ts
        self._in_order = {}  # (request role, direction) -> deque of (command, ts)
        # True while every byte of both directions since the SYN has been decoded.
        self.complete = complete

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

    @cython.locals(rows=ColumnBuffer)
    def add_producer(self, rows: ColumnBuffer) -> None:
        self.producers[rows.get(PRODUCER_ID)] = Producer(rows)

    @cython.locals(rows=ColumnBuffer)
    def add_consumer(self, rows: ColumnBuffer) -> None:
        self.consumers[rows.get(CONSUMER_ID)] = Consumer(rows, 0 if self.complete else None)

    @cython.ccall
    @cython.locals(rows=ColumnBuffer, named=cython.bint)
    @cython.returns(cython.void)
    def fill_names(self, rows: ColumnBuffer, named: bool) -> None:
        """Copy topic / subscription / names of the ids the row being built carries.

        ``named``: the row may already hold some of those columns (from the command
        itself or the request it answers); those values win over the state's.
        """
        producer_id = rows.get(PRODUCER_ID)
        if producer_id is not None:
            producer = self.producers.get(producer_id)
            if producer is not None:
                merge_names(rows, producer.names, named)
        consumer_id = rows.get(CONSUMER_ID)
        if consumer_id is not None:
            consumer = self.consumers.get(consumer_id)
            if consumer is not None:
                merge_names(rows, consumer.names, named)

    # -- pairing -------------------------------------------------------------------------

    @cython.ccall
    @cython.locals(role=cython.int, rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.returns(cython.bint)
    def pair(self, role: int, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        """Record or match the row being built by its pairing ``role`` (a code of
        :data:`ROLE_CODES`); False for a response whose request was not seen. A response
        that is not ``final`` (PRODUCER_SUCCESS with ``producer_ready`` false: another
        follows once the producer gets access) leaves its request outstanding."""
        if role == _SEND:
            return self._pair_send(rows, direction, final)
        if role == _RECEIPT:
            return self._pair_receipt(rows, direction, final)
        if role == _REQUEST:
            return self._pair_request(rows, direction, final)
        if role == _RESPONSE:
            return self._pair_response(rows, direction, final)
        if role == _ACK:
            return self._pair_ack(rows, direction, final)
        if role == _ACK_RESPONSE:
            return self._pair_ack_response(rows, direction, final)
        if role < _FIRST_ANSWER:
            self.record_in_order(_ORDERED_ROLES[role], direction, rows)
            return True
        return self.take_in_order(_ORDERED_ROLES[role], 1 - direction, rows)

    @cython.cfunc
    @cython.locals(rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.returns(cython.bint)
    def _pair_request(self, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        if direction == 0:  # the broker's CLOSE_PRODUCER / CLOSE_CONSUMER expect no answer
            self._add_request(rows.get(REQUEST_ID), _request(rows))
        return True

    # Typed locals (compiled): every SEND and receipt passes here, and the operations on
    # a dict, list or row builder known as such are C calls, not attribute lookups and
    # method calls.
    @cython.cfunc
    @cython.locals(rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.locals(sends=dict, waiting=list)
    @cython.returns(cython.bint)
    def _pair_send(self, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        key = (rows.get(PRODUCER_ID), rows.get(SEQUENCE_ID))
        sends = self._sends
        waiting = sends.get(key)
        if waiting is None:
            if len(sends) >= MAX_PENDING:
                _drop_oldest(sends, self)
            sends[key] = [rows.get(TS)]
        else:
            waiting.append(rows.get(TS))
        return True

    @cython.cfunc
    @cython.locals(rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.locals(sends=dict, waiting=list)
    @cython.returns(cython.bint)
    def _pair_receipt(self, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        key = (rows.get(PRODUCER_ID), rows.get(SEQUENCE_ID))
        sends = self._sends
        waiting = sends.get(key)
        if waiting is None:
            return False
        rows.set_text(ANSWERS, "SEND")
        rows.set(REQUEST_TS, waiting.pop(0))
        if not waiting:
            del sends[key]
        return True

    @cython.cfunc
    @cython.locals(rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.returns(cython.bint)
    def _pair_ack(self, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        request_id = rows.get(REQUEST_ID)
        if request_id is not None:
            _put(self._acks, (rows.get(CONSUMER_ID), request_id), rows.get(TS), self)
        return True

    @cython.cfunc
    @cython.locals(rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.returns(cython.bint)
    def _pair_ack_response(self, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        request_id = rows.get(REQUEST_ID)
        if request_id is None:
            return True
        ts = self._acks.pop((rows.get(CONSUMER_ID), request_id), None)
        if ts is None:
            return False
        rows.set_text(ANSWERS, "ACK")
        rows.set(REQUEST_TS, ts)
        return True

    def _add_request(self, request_id: int | None, request: Request) -> None:
        waiting = self._requests.get(request_id)
        if waiting is None:
            _put(self._requests, request_id, [request], self)
            return
        if len(waiting) >= MAX_SAME_ID:
            del waiting[0]
            self.complete = False
        waiting.append(request)

    @cython.cfunc
    @cython.locals(rows=ColumnBuffer, direction=cython.int, final=cython.bint)
    @cython.locals(waiting=list, ranks=dict, candidate=tuple)
    @cython.locals(index=cython.Py_ssize_t, best=cython.Py_ssize_t)
    @cython.locals(rank=cython.Py_ssize_t, best_rank=cython.Py_ssize_t)
    @cython.returns(cython.bint)
    def _pair_response(self, rows: ColumnBuffer, direction: int, final: bool) -> bool:
        request = None
        request_id = rows.get(REQUEST_ID)
        waiting = self._requests.get(request_id) if direction == 1 else None
        command = rows.get(COMMAND)
        if waiting:
            ranks = _ANSWER_RANKS[command]
            best = -1
            best_rank = len(ranks)
            for index in range(len(waiting)):
                candidate = waiting[index]
                rank = ranks.get(candidate[0], best_rank)
                if rank < best_rank:
                    best, best_rank = index, rank
            if best >= 0:
                request = waiting.pop(best) if final else waiting[best]
                if not waiting:
                    del self._requests[request_id]
        if request is None:
            # A broker refusing CONNECT answers with ERROR and no meaningful request id.
            return command == "ERROR" and self.take_in_order(c.CONNECT, 1 - direction, rows)
        name, ts, topic, producer_id, consumer_id = request
        rows.set(ANSWERS, name)
        rows.set(REQUEST_TS, ts)
        _inherit(rows, TOPIC, topic)
        _inherit(rows, PRODUCER_ID, producer_id)
        _inherit(rows, CONSUMER_ID, consumer_id)
        return True

    @cython.locals(rows=ColumnBuffer)
    def record_in_order(self, role: str, direction: int, rows: ColumnBuffer) -> None:
        """A request the other side answers in order (PING, CONNECT, AUTH_CHALLENGE)."""
        queue = self._in_order.setdefault((role, direction), deque(maxlen=MAX_PENDING))
        queue.append((rows.get(COMMAND), rows.get(TS)))

    @cython.locals(rows=ColumnBuffer)
    def take_in_order(self, request_role: str, direction: int, rows: ColumnBuffer) -> bool:
        queue = self._in_order.get((request_role, direction))
        if not queue:
            return False
        answers, ts = queue.popleft()
        rows.set(ANSWERS, answers)
        rows.set(REQUEST_TS, ts)
        return True


# -- permits (module functions of a state's ``consumers``: the decoder calls them as C) ----
#
# The permit ledger of jobs/permits.py, kept as the frames are decoded. The job's is the
# reference (its timeline is what users read, and a test holds its starvation to the
# broker's record); the decoder keeps its own only to report a MESSAGE delivered beyond
# the granted permits as a `protocol_violation` anomaly, and only where it is sure of the
# balance. Both follow one rule: a consumer starts at zero, a FLOW adds its permits, a
# delivered entry spends its number of messages, and a delivery at zero or below is
# beyond the permits; tests/test_permit_ledgers.py holds their verdicts equal. They part
# at the edges, where the decoder chooses to know nothing rather than guess:
# - a capture that starts mid-connection: the job starts a consumer's ledger at the
#   broker's answer to a SUBSCRIBE it sees; the decoder keeps none on that connection;
# - bytes lost (a gap, a resync): the decoder forgets the connection's balances, as a FLOW
#   may have been in the hole; the job carries on, its balance now maybe too low;
# - the start: the decoder at the SUBSCRIBE, the job at the broker's SUCCESS (a client
#   sends FLOW only after it, and a refused SUBSCRIBE gets no deliveries);
# - the order: the decoder takes the frames as reassembly delivers them, the job sorts
#   them by capture time (then direction and offset); the two part only where the capture
#   is ambiguous (frames of both directions ending in the same microsecond, reordered
#   segments).


@cython.ccall
@cython.locals(consumers=dict)
@cython.returns(cython.void)
def grant(consumers: dict[int, Consumer], consumer_id: int, permits: int) -> None:
    """A FLOW's permits, added to its consumer's balance while that is known."""
    consumer = consumers.get(consumer_id)
    if consumer is not None and consumer.permits is not None:
        consumer.permits += permits


@cython.ccall
@cython.locals(consumers=dict)
def spend(consumers: dict[int, Consumer], consumer_id: int, messages: int) -> int | None:
    """Charge a delivered entry; return the balance before it (None if unknown)."""
    consumer = consumers.get(consumer_id)
    if consumer is None or consumer.permits is None:
        return None
    before = consumer.permits
    consumer.permits = before - messages
    return before


@cython.cfunc
@cython.locals(rows=ColumnBuffer, column=cython.Py_ssize_t)
def _inherit(rows: ColumnBuffer, column: int, value: Any) -> cython.void:
    """A response takes a column's value over from its request, unless it has its own."""
    if value is not None and not rows.has(column):
        rows.set(column, value)


@cython.ccall
@cython.locals(rows=ColumnBuffer, names=dict, keep_row_values=cython.bint)
@cython.returns(cython.void)
def merge_names(rows: ColumnBuffer, names: dict[int, str], keep_row_values: bool) -> None:
    """Set the row's name columns (position -> value) to ``names``; where the row has a
    value already, it stays when ``keep_row_values``."""
    for column, value in names.items():
        if not keep_row_values or not rows.has(column):
            rows.set(column, value)


def _put(table: dict, key: Any, value: Any, state: ConnectionState) -> None:
    """Insert, dropping the oldest entry when the table is full (pairing then unreliable)."""
    if len(table) >= MAX_PENDING:
        _drop_oldest(table, state)
    table[key] = value


def _drop_oldest(table: dict, state: ConnectionState) -> None:
    del table[next(iter(table))]
    state.complete = False
