"""The broker's network side: one asyncio task per client connection.

Each connection reads frames, answers them, and hands topic work to :mod:`topics`.
Every frame read or written passes through the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from tests.broker.journal import Journal
from tests.broker.openssl import key_update
from tests.broker.tls import TlsSettings, describe_session
from tests.broker.topics import Consumer, Entry, Subscription, Topic
from tests.broker.wire import U32, Frame, build_frame, command_of, parse_frame

T = pb.BaseCommand
PROTOCOL_VERSION = 21
SERVER_VERSION = "pwcap-test-broker"
UNSET_ID = 2**64 - 1  # how an id of -1 travels in a uint64 field
INITIAL_EARLIEST = pb.CommandSubscribe.InitialPosition.Value("Earliest")


@dataclass
class BrokerConfig:
    host: str = "127.0.0.1"
    port: int = 6650
    max_message_size: int = 5 * 1024 * 1024
    partitions: dict[str, int] = field(default_factory=dict)  # topic -> partition count
    entry_metadata: bool = False  # prepend broker entry metadata when the client supports it
    ping_interval: float | None = None  # broker-initiated keep-alive, seconds
    journal: Path | None = None
    advertised_host: str | None = None  # name clients use (they reject IPv6 literals)
    tls: TlsSettings | None = None  # speak TLS (pulsar+ssl://)
    # Trouble to make, for the findings' scenarios:
    # command -> (how many of the first requests of it are refused, with which error)
    refuse: dict[str, tuple[int, str]] = field(default_factory=dict)
    # topic -> the ACK on it that unloads it: that ACK is lost (the topic is closing) and
    # the broker closes every producer and consumer of the topic, which reconnect
    unload_on_ack: dict[str, int] = field(default_factory=dict)
    hold_receipts_after: dict[str, int] = field(default_factory=dict)  # topic -> SENDs receipted
    # stop reading a connection for this long after its first SEND (a broker stalled by a
    # long pause), with a receive buffer this small so that the client's bytes fill it
    stall_reading: float | None = None
    receive_buffer: int | None = None
    slow_answers: dict[str, float] = field(default_factory=dict)  # command -> seconds taken
    # topic -> (how many of its first SENDs are refused with SEND_ERROR, with which error)
    send_errors: dict[str, tuple[int, str]] = field(default_factory=dict)

    @property
    def service_url(self) -> str:
        scheme = "pulsar+ssl" if self.tls is not None else "pulsar"
        return f"{scheme}://{self.advertised_host or self.host}:{self.port}"


class Broker:
    """Topics shared by all connections, and the listening socket."""

    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.journal = Journal(config.journal)
        self.topics: dict[str, Topic] = {}
        self.connections: list[Connection] = []
        self.refused: dict[str, int] = {}  # command -> requests refused so far
        self.acks_seen: dict[str, int] = {}  # topic -> ACKs read
        self.sends_seen: dict[str, int] = {}  # topic -> SENDs read
        self.sends_refused: dict[str, int] = {}  # topic -> SEND_ERRORs answered
        self._connection_ids = itertools.count(1)
        self._server: asyncio.Server | None = None
        self._context: ssl.SSLContext | None = None
        self._sessions: IO[str] | None = None

    def topic(self, name: str) -> Topic:
        if name not in self.topics:
            self.topics[name] = Topic(name, ledger_id=100 + len(self.topics))
        return self.topics[name]

    async def start(self) -> None:
        tls = self.config.tls
        context = self._context = tls.context() if tls is not None else None
        self._sessions = tls.sessions.open("w") if tls is not None and tls.sessions else None
        self._server = await asyncio.start_server(
            self._serve, self.config.host, self.config.port, ssl=context
        )
        if self.config.receive_buffer:  # accepted sockets inherit it (and their window scale)
            for listening in self._server.sockets:
                listening.setsockopt(
                    socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.receive_buffer
                )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.journal.close()
        if self._sessions is not None:
            self._sessions.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(self, next(self._connection_ids), reader, writer)
        if self._sessions is not None:
            session = describe_session(writer.get_extra_info("ssl_object"), self._context)
            self._sessions.write(json.dumps({**connection.identity, **session}) + "\n")
            self._sessions.flush()
        self.connections.append(connection)
        try:
            await connection.run()
        finally:
            self.connections.remove(connection)

    def refusal(self, command: str) -> str | None:
        """The error to refuse this ``command`` request with, while refusals remain."""
        count, error = self.config.refuse.get(command, (0, ""))
        refused = self.refused.get(command, 0)
        if refused >= count:
            return None
        self.refused[command] = refused + 1
        return error

    def unload(self, topic: str) -> None:
        """Close every producer and consumer of ``topic`` from the broker's side."""
        for connection in list(self.connections):
            connection.close_topic(topic)


class Connection:
    """One client connection: its producers, consumers and the frames in both directions."""

    def __init__(
        self,
        broker: Broker,
        conn_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.broker = broker
        self.reader = reader
        self.writer = writer
        client = writer.get_extra_info("peername")
        server = writer.get_extra_info("sockname")
        self.identity = {
            "conn": conn_id,
            "client": f"{client[0]}:{client[1]}",
            "broker": f"{server[0]}:{server[1]}",
        }
        self.producers: dict[int, Topic] = {}
        self.consumers: dict[int, tuple[Subscription, Consumer]] = {}
        self.entry_metadata = False
        self._producer_names = itertools.count(1)
        self._written = 0  # frames written (KeyUpdates come every so many)
        self._stalled = False

    async def run(self) -> None:
        pinger = None
        if self.broker.config.ping_interval:
            pinger = asyncio.create_task(self._ping_loop(self.broker.config.ping_interval))
        try:
            while True:
                header = await self.reader.readexactly(4)
                body = await self.reader.readexactly(U32.unpack(header)[0])
                frame = parse_frame(body)
                self.broker.journal.record(self.identity, "c2b", frame)
                self.handle(frame)
                await self.writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if pinger is not None:
                pinger.cancel()
            for subscription, consumer in self.consumers.values():
                subscription.remove(consumer)
            self.consumers.clear()
            self.writer.close()
            with contextlib.suppress(ConnectionError):
                await self.writer.wait_closed()

    async def _ping_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.send(command_of(T.PING))

    def send(
        self,
        command: pb.BaseCommand,
        stored: bytes = b"",
        entry_metadata: pb.BrokerEntryMetadata | None = None,
    ) -> None:
        data = build_frame(command, stored, entry_metadata)
        self.broker.journal.record(self.identity, "b2c", parse_frame(data[4:]))
        tls = self.broker.config.tls
        self._written += 1
        if tls is not None and tls.key_update_every and self._written % tls.key_update_every == 0:
            key_update(self.writer.get_extra_info("ssl_object"))  # goes out with this frame
        self.writer.write(data)

    def handle(self, frame: Frame) -> None:
        command = frame.command
        handler = HANDLERS.get(command.type)
        if handler is None:
            return
        delay = self.broker.config.slow_answers.get(T.Type.Name(command.type))
        if delay:  # a broker slow to do this: it answers after a while
            asyncio.get_running_loop().call_later(delay, handler, self, command, frame)
        else:
            handler(self, command, frame)

    def _refuse(self, name: str, request_id: int) -> bool:
        """Answer the request with the configured error while refusals of it remain."""
        error = self.broker.refusal(name)
        if error is None:
            return False
        self.send(
            command_of(
                T.ERROR,
                request_id=request_id,
                error=pb.ServerError.Value(error),
                message=f"{name} refused by the test broker ({error})",
            )
        )
        return True

    def _stall(self) -> None:
        """Stop reading this connection for ``stall_reading`` seconds (once)."""
        if self.broker.config.stall_reading and not self._stalled:
            self._stalled = True
            transport = self.writer.transport
            transport.pause_reading()
            asyncio.get_running_loop().call_later(
                self.broker.config.stall_reading, transport.resume_reading
            )

    def close_topic(self, topic: str) -> None:
        """The topic is unloaded: its producers and consumers here are closed."""
        for producer_id, producing in list(self.producers.items()):
            if producing.name == topic:
                del self.producers[producer_id]
                self.send(command_of(T.CLOSE_PRODUCER, producer_id=producer_id, request_id=0))
        for consumer_id, (subscription, consumer) in list(self.consumers.items()):
            if subscription.topic.name == topic:
                del self.consumers[consumer_id]
                self.send(command_of(T.CLOSE_CONSUMER, consumer_id=consumer_id, request_id=0))
                subscription.remove(consumer)

    # ---- connection --------------------------------------------------------------------

    def on_connect(self, command: pb.BaseCommand, frame: Frame) -> None:
        connect = command.connect
        self.entry_metadata = (
            self.broker.config.entry_metadata
            and connect.feature_flags.supports_broker_entry_metadata
        )
        self.send(
            command_of(
                T.CONNECTED,
                server_version=SERVER_VERSION,
                protocol_version=min(connect.protocol_version, PROTOCOL_VERSION),
                max_message_size=self.broker.config.max_message_size,
            )
        )

    def on_ping(self, command: pb.BaseCommand, frame: Frame) -> None:
        self.send(command_of(T.PONG))

    # ---- discovery ---------------------------------------------------------------------

    def on_partitioned_metadata(self, command: pb.BaseCommand, frame: Frame) -> None:
        request = command.partitionMetadata
        self.send(
            command_of(
                T.PARTITIONED_METADATA_RESPONSE,
                request_id=request.request_id,
                partitions=self.broker.config.partitions.get(request.topic, 0),
                response=pb.CommandPartitionedTopicMetadataResponse.Success,
            )
        )

    def on_lookup(self, command: pb.BaseCommand, frame: Frame) -> None:
        error = self.broker.refusal("LOOKUP")
        if error is not None:
            self.send(
                command_of(
                    T.LOOKUP_RESPONSE,
                    request_id=command.lookupTopic.request_id,
                    response=pb.CommandLookupTopicResponse.Failed,
                    error=pb.ServerError.Value(error),
                    message=f"LOOKUP refused by the test broker ({error})",
                )
            )
            return
        self.send(
            command_of(
                T.LOOKUP_RESPONSE,
                request_id=command.lookupTopic.request_id,
                brokerServiceUrl=self.broker.config.service_url,
                brokerServiceUrlTls=self.broker.config.service_url,
                response=pb.CommandLookupTopicResponse.Connect,
                authoritative=True,
            )
        )

    # ---- producing ---------------------------------------------------------------------

    def on_producer(self, command: pb.BaseCommand, frame: Frame) -> None:
        request = command.producer
        if self._refuse("PRODUCER", request.request_id):
            return
        self.producers[request.producer_id] = self.broker.topic(request.topic)
        name = request.producer_name or f"{SERVER_VERSION}-{next(self._producer_names)}"
        self.send(
            command_of(
                T.PRODUCER_SUCCESS,
                request_id=request.request_id,
                producer_name=name,
                last_sequence_id=-1,
            )
        )

    def on_send(self, command: pb.BaseCommand, frame: Frame) -> None:
        send = command.send
        topic = self.producers.get(send.producer_id)
        if topic is None:  # a producer the broker closed (an unload): the send is lost
            return
        count, error = self.broker.config.send_errors.get(topic.name, (0, ""))
        refused = self.broker.sends_refused.get(topic.name, 0)
        if refused < count:  # the broker could not store it
            self.broker.sends_refused[topic.name] = refused + 1
            self.send(
                command_of(
                    T.SEND_ERROR,
                    producer_id=send.producer_id,
                    sequence_id=send.sequence_id,
                    error=pb.ServerError.Value(error),
                    message=f"SEND refused by the test broker ({error})",
                )
            )
            return
        entry = topic.append(send.num_messages, frame.stored, time.time_ns() // 1_000_000)
        self._stall()
        seen = self.broker.sends_seen[topic.name] = self.broker.sends_seen.get(topic.name, 0) + 1
        if seen > self.broker.config.hold_receipts_after.get(topic.name, seen):
            return  # stored, never receipted: a broker stuck before answering
        message_id = pb.MessageIdData(ledgerId=topic.ledger_id, entryId=entry.entry_id)
        self.send(
            command_of(
                T.SEND_RECEIPT,
                producer_id=send.producer_id,
                sequence_id=send.sequence_id,
                message_id=message_id,
                highest_sequence_id=send.highest_sequence_id,
            )
        )

    def on_close_producer(self, command: pb.BaseCommand, frame: Frame) -> None:
        self.producers.pop(command.close_producer.producer_id, None)
        self.send(command_of(T.SUCCESS, request_id=command.close_producer.request_id))

    # ---- consuming ---------------------------------------------------------------------

    def on_subscribe(self, command: pb.BaseCommand, frame: Frame) -> None:
        request = command.subscribe
        if self._refuse("SUBSCRIBE", request.request_id):
            return
        topic = self.broker.topic(request.topic)
        subscription = topic.subscriptions.get(request.subscription)
        if subscription is None:
            start = 0 if request.initialPosition == INITIAL_EARLIEST else len(topic.entries)
            subscription = Subscription(topic, request.subscription, request.subType, start)
            topic.subscriptions[request.subscription] = subscription
        consumer = Consumer(request.consumer_id, request.consumer_name, self.deliver)
        self.consumers[request.consumer_id] = (subscription, consumer)
        self.send(command_of(T.SUCCESS, request_id=request.request_id))
        subscription.add(consumer)

    def deliver(self, consumer: Consumer, entry: Entry, redelivery_count: int) -> None:
        subscription, _ = self.consumers[consumer.consumer_id]
        message_id = pb.MessageIdData(ledgerId=subscription.topic.ledger_id, entryId=entry.entry_id)
        entry_metadata = None
        if self.entry_metadata:
            entry_metadata = pb.BrokerEntryMetadata(
                broker_timestamp=entry.broker_timestamp,
                index=entry.first_index + entry.num_messages - 1,
            )
        command = command_of(
            T.MESSAGE,
            consumer_id=consumer.consumer_id,
            message_id=message_id,
            redelivery_count=redelivery_count,
        )
        self.send(command, entry.stored, entry_metadata)

    def on_flow(self, command: pb.BaseCommand, frame: Frame) -> None:
        found = self.consumers.get(command.flow.consumer_id)
        if found is not None:
            subscription, consumer = found
            subscription.flow(consumer, command.flow.messagePermits)

    def on_ack(self, command: pb.BaseCommand, frame: Frame) -> None:
        ack = command.ack
        found = self.consumers.get(ack.consumer_id)
        if found is not None:
            topic = found[0].topic.name
            seen = self.broker.acks_seen[topic] = self.broker.acks_seen.get(topic, 0) + 1
            if seen == self.broker.config.unload_on_ack.get(topic):
                self.broker.unload(topic)  # this ACK is lost with the closing topic
                return
            found[0].ack(list(ack.message_id), ack.ack_type == pb.CommandAck.Cumulative)
        if ack.HasField("request_id"):
            self.send(
                command_of(T.ACK_RESPONSE, consumer_id=ack.consumer_id, request_id=ack.request_id)
            )

    def on_redeliver(self, command: pb.BaseCommand, frame: Frame) -> None:
        request = command.redeliverUnacknowledgedMessages
        found = self.consumers.get(request.consumer_id)
        if found is not None:
            entry_ids = [m.entryId for m in request.message_ids] or None
            found[0].redeliver(found[1], entry_ids)

    def _end_consumer(self, consumer_id: int, request_id: int, unsubscribe: bool) -> None:
        found = self.consumers.pop(consumer_id, None)
        if found is not None:
            subscription, consumer = found
            subscription.remove(consumer)
            if unsubscribe:
                subscription.topic.subscriptions.pop(subscription.name, None)
        self.send(command_of(T.SUCCESS, request_id=request_id))

    def on_close_consumer(self, command: pb.BaseCommand, frame: Frame) -> None:
        close = command.close_consumer
        self._end_consumer(close.consumer_id, close.request_id, unsubscribe=False)

    def on_unsubscribe(self, command: pb.BaseCommand, frame: Frame) -> None:
        request = command.unsubscribe
        self._end_consumer(request.consumer_id, request.request_id, unsubscribe=True)

    def on_seek(self, command: pb.BaseCommand, frame: Frame) -> None:
        seek = command.seek
        self.send(command_of(T.SUCCESS, request_id=seek.request_id))
        found = self.consumers.get(seek.consumer_id)
        if found is not None:
            entry_id = seek.message_id.entryId if seek.HasField("message_id") else UNSET_ID
            found[0].seek(0 if entry_id == UNSET_ID else entry_id)  # -1 means the earliest

    def on_get_last_message_id(self, command: pb.BaseCommand, frame: Frame) -> None:
        request = command.getLastMessageId
        subscription, _ = self.consumers[request.consumer_id]
        entries = subscription.topic.entries
        last = pb.MessageIdData(
            ledgerId=subscription.topic.ledger_id if entries else UNSET_ID,
            entryId=entries[-1].entry_id if entries else UNSET_ID,
        )
        self.send(
            command_of(
                T.GET_LAST_MESSAGE_ID_RESPONSE, request_id=request.request_id, last_message_id=last
            )
        )


HANDLERS = {
    T.CONNECT: Connection.on_connect,
    T.PING: Connection.on_ping,
    T.PARTITIONED_METADATA: Connection.on_partitioned_metadata,
    T.LOOKUP: Connection.on_lookup,
    T.PRODUCER: Connection.on_producer,
    T.SEND: Connection.on_send,
    T.CLOSE_PRODUCER: Connection.on_close_producer,
    T.SUBSCRIBE: Connection.on_subscribe,
    T.FLOW: Connection.on_flow,
    T.ACK: Connection.on_ack,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: Connection.on_redeliver,
    T.CLOSE_CONSUMER: Connection.on_close_consumer,
    T.UNSUBSCRIBE: Connection.on_unsubscribe,
    T.SEEK: Connection.on_seek,
    T.GET_LAST_MESSAGE_ID: Connection.on_get_last_message_id,
}
