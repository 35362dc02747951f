"""A Kafka 0.7 test broker on loopback that journals every request and response.

``python -m tests.kafka07.broker --port 9092 --journal broker.jsonl [--partitions T=N]``

Requests are served in order per connection, as 0.7's socket server does. Where 0.7
lets an exception escape its handler (a PRODUCE to a wrong partition, a bad CRC, an
OFFSETS on a wrong partition, an unknown request type) it closes the connection without
answering: so does this broker, and the journal says so (``dir`` ``close``).

Journal rows (JSON lines, in the order things happened): ``t_us``, ``conn``, ``client``,
``broker``, ``dir`` (``c2b`` request, ``b2c`` response, ``close``), ``type`` (request type
name), ``size`` (bytes on the wire, with the length prefix), ``parts`` (one per topic and
partition: ``topic``, ``partition``, and ``offset``/``max_size``, ``time``/``max_offsets``,
or the produced set's ``messages``), for responses ``error`` and per part ``error``,
``bytes``, ``messages``, ``outer_messages``, ``truncated_tail``, ``offsets``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import random
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.kafka07 import protocol as p
from tests.kafka07.logs import InvalidMessage, InvalidPartition, LogManager, OffsetOutOfRange
from tests.kafka07.messages import read_message_set

MAX_REQUEST_SIZE = 100 * 1024 * 1024  # socket.request.max.bytes


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 9092
    default_partitions: int = 1
    partitions: dict[str, int] = field(default_factory=dict)
    journal: Path | None = None


class Journal:
    """One JSON object per request, response or close, flushed per line."""

    def __init__(self, path: Path | None) -> None:
        self._out: IO[str] | None = path.open("w") if path is not None else None

    def record(self, conn: dict[str, object], direction: str, **row: object) -> None:
        if self._out is None:
            return
        line = {"t_us": time.time_ns() // 1000, **conn, "dir": direction, **row}
        self._out.write(json.dumps(line, sort_keys=True) + "\n")
        self._out.flush()

    def close(self) -> None:
        if self._out is not None:
            self._out.close()


class CloseConnection(Exception):
    """What 0.7 does when a handler throws: drop the socket, answer nothing."""


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.logs = LogManager(config.default_partitions, dict(config.partitions))
        self.journal = Journal(config.journal)
        self._ids = itertools.count(1)
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.config.host, self.config.port)

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.journal.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        conn = {
            "conn": next(self._ids),
            "client": f"{peer[0]}:{peer[1]}",
            "broker": f"{local[0]}:{local[1]}",
        }
        try:
            while True:
                head = await reader.readexactly(4)
                (length,) = struct.unpack(">i", head)
                if length <= 0 or length > MAX_REQUEST_SIZE:
                    raise CloseConnection(f"request size {length}")
                body = await reader.readexactly(length)
                response = self.handle(conn, body)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        except CloseConnection as reason:
            self.journal.record(conn, "close", reason=str(reason))
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def handle(self, conn: dict[str, object], body: bytes) -> bytes | None:
        """Journal the request, act on it, journal and return the response (if any)."""
        try:
            request = p.parse_request(body)
        except p.MalformedRequest as error:
            raise CloseConnection(str(error)) from error
        if request.type in (p.PRODUCE, p.MULTIPRODUCE):
            self.produce_all(conn, request, len(body) + 4)
            return None
        parts = [describe_part(part) for part in request.parts]
        self.journal.record(conn, "c2b", type=request.name, size=len(body) + 4, parts=parts)
        if request.type == p.OFFSETS:
            return self.offsets(conn, request.parts[0])
        sends, rows = zip(*(self.fetch(part) for part in request.parts), strict=True)
        if request.type == p.FETCH:
            response = sends[0]
            self._respond(conn, request.name, response, rows[0]["error"], list(rows))
        else:
            response = p.encode_multi_message_set_send(list(sends))
            self._respond(conn, request.name, response, p.NO_ERROR, list(rows))
        return response

    def _respond(
        self, conn: dict[str, object], name: str, response: bytes, error: int, parts: list[dict]
    ) -> None:
        self.journal.record(conn, "b2c", type=name, size=len(response), error=error, parts=parts)

    def produce_all(self, conn: dict[str, object], request: p.Request, size: int) -> None:
        """Append each part in order; journal the request with where each part went.

        A part 0.7 would fail on (wrong partition, bad CRC) stops the request there, as the
        exception does in 0.7: earlier parts stay stored, the connection is closed.
        """
        rows: list[dict[str, object]] = []
        failure: CloseConnection | None = None
        for part in request.parts:
            assert isinstance(part, p.Produce)
            row: dict[str, object] = {"topic": part.topic, "partition": part.partition}
            rows.append(row)
            if failure is None:
                failure = self.produce(part, row)
            row.update(describe_set(part.messages, int(row.get("stored_at", 0))))
        self.journal.record(conn, "c2b", type=request.name, size=size, parts=rows)
        if failure is not None:
            raise failure

    def produce(self, part: p.Produce, row: dict[str, object]) -> CloseConnection | None:
        partition = part.partition
        if partition == -1:  # ProducerRequest.RandomPartition
            count = self.logs.partitions.get(part.topic, self.logs.default_partitions)
            partition = random.randrange(count)
            row["stored_partition"] = partition
        try:
            log = self.logs.get_or_create(part.topic, partition)
            stored_at = len(log.data)
            row["stored_bytes"] = log.append(part.messages)
            row["stored_at"] = stored_at
        except (InvalidPartition, InvalidMessage) as error:
            return CloseConnection(f"{type(error).__name__}: {error}")
        return None

    def fetch(self, part: p.Part) -> tuple[bytes, dict[str, object]]:
        """A MessageSetSend for one fetch, with the row describing it."""
        assert isinstance(part, p.Fetch)
        row: dict[str, object] = {"topic": part.topic, "partition": part.partition}
        row["offset"] = part.offset
        try:
            log = self.logs.get(part.topic, part.partition)
            data = b"" if log is None else log.read(part.offset, part.max_size)
            error = p.NO_ERROR
        except OffsetOutOfRange:
            data, error = b"", p.OFFSET_OUT_OF_RANGE
        except InvalidPartition:
            data, error = b"", p.WRONG_PARTITION
        row["error"] = error
        row.update(describe_set(data, part.offset))
        return p.encode_message_set_send(error, data), row

    def offsets(self, conn: dict[str, object], part: p.Part) -> bytes:
        assert isinstance(part, p.Offsets)
        try:
            offsets = self.logs.offsets(part.topic, part.partition, part.time, part.max_offsets)
        except InvalidPartition as error:
            raise CloseConnection(f"InvalidPartition: {error}") from error
        response = p.encode_offset_array_send(offsets)
        row = {"topic": part.topic, "partition": part.partition, "offsets": offsets}
        self._respond(conn, "OFFSETS", response, p.NO_ERROR, [row])
        return response


def describe_set(data: bytes, base_offset: int) -> dict[str, object]:
    message_set = read_message_set(data, base_offset)
    return {
        "bytes": len(data),
        "outer_messages": message_set.outer_messages,
        "truncated_tail": message_set.truncated_tail,
        "messages": [m.as_json() for m in message_set.messages],
    }


def describe_part(part: p.Fetch | p.Offsets) -> dict[str, object]:
    row: dict[str, object] = {"topic": part.topic, "partition": part.partition}
    if isinstance(part, p.Fetch):
        row.update(offset=part.offset, max_size=part.max_size)
    elif isinstance(part, p.Offsets):
        row.update(time=part.time, max_offsets=part.max_offsets)
    return row


def parse_args() -> BrokerConfig:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument("--num-partitions", type=int, default=1)
    parser.add_argument("--partitions", action="append", default=[], metavar="TOPIC=N")
    parser.add_argument("--journal", type=Path)
    args = parser.parse_args()
    partitions = {t: int(n) for t, n in (item.rsplit("=", 1) for item in args.partitions)}
    return BrokerConfig(args.host, args.port, args.num_partitions, partitions, args.journal)


async def serve(config: BrokerConfig) -> None:
    broker = Broker(config)
    await broker.start()
    print(f"listening on {config.host}:{broker.port}", flush=True)  # regenerate waits for it
    try:
        await asyncio.Event().wait()
    finally:
        await broker.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parse_args()))
