"""Matching 0.7 responses to requests: in order, because nothing else ties them together.

A connection answers its FETCH, MULTIFETCH and OFFSETS requests one response each, in the
order they were sent; PRODUCE and MULTIPRODUCE get none. While every byte since the start
of the connection has been decoded, the next response answers the oldest unanswered
request. Once bytes are lost (a gap, a resync, a capture that starts mid-connection) the
count of requests still unanswered is unknown and order alone proves nothing: pairing
stops, and requests sent before lost responses are forgotten (:meth:`Pairing.lose`). It
resumes at the first response that *fits* a waiting request (its body has the shape that
request's answer must have, and it began after the request was complete); the requests
before that one are taken as answered in the lost bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .wire import Part

MAX_PENDING = 10_000  # unanswered requests kept per connection


class Pending:
    """A request that expects a response; ``parts`` None for one lost in missing bytes
    whose type was seen (``ts`` is then when the loss was noticed, not when it was sent)."""

    __slots__ = ("name", "parts", "ts", "type")

    def __init__(self, request_type: int, name: str, ts: int, parts: list[Part] | None) -> None:
        self.type = request_type
        self.name = name
        self.ts = ts  # capture time of the request's last byte
        self.parts = parts


Fits = Callable[[Pending], bool]


class Pairing:
    """The requests of one connection awaiting their responses."""

    def __init__(self, in_step: bool) -> None:
        self._queue: deque[Pending] = deque()
        self.in_step = in_step  # True while order alone pairs responses

    def request(self, pending: Pending) -> None:
        if len(self._queue) >= MAX_PENDING:  # a silent broker: order can no longer be trusted
            self.lose()
            self._queue.popleft()
        self._queue.append(pending)

    def lose(self, responses_until: int | None = None) -> bool:
        """Bytes went missing; return whether pairing was in step until now.

        Lost requests leave the waiting ones valid (their answers still come first); lost
        responses, captured up to ``responses_until``, may have answered any request sent
        before then, so those requests are forgotten.
        """
        was = self.in_step
        self.in_step = False
        if responses_until is not None:
            queue = self._queue
            while queue and queue[0].ts <= responses_until:
                queue.popleft()
        return was

    def skip_response(self) -> None:
        """One response was lost whole: it answered the oldest waiting request."""
        if self._queue:
            self._queue.popleft()

    def response(self, ts_first: int, fits: Fits) -> tuple[Pending | None, bool]:
        """The request a response starting at ``ts_first`` answers, if known, and whether
        pairing fell out of step on this response (it fits no request order allows)."""
        queue = self._queue
        if self.in_step:
            if not queue:
                return None, False
            head = queue[0]
            if fits(head):
                return queue.popleft(), False
            self.in_step = False
            queue.clear()
            return None, True
        for index, pending in enumerate(queue):
            if pending.ts <= ts_first and fits(pending):
                for _ in range(index + 1):
                    queue.popleft()
                self.in_step = True
                return pending, False
        return None, False
