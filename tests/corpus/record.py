"""What the client side knows: every message it sent and every delivery it received."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

import pulsar


def quiet_logger() -> logging.Logger:
    """The C++ client logs every step at INFO; keep the regenerate output readable."""
    logger = logging.getLogger("pulsar-client")
    logger.setLevel(logging.WARNING)
    return logger


def message_id_of(message_id: pulsar.MessageId) -> list[int]:
    return [
        message_id.ledger_id(),
        message_id.entry_id(),
        message_id.partition(),
        message_id.batch_index(),
    ]


def digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


@dataclass
class ClientRecord:
    sent: list[dict[str, object]] = field(default_factory=list)
    received: list[dict[str, object]] = field(default_factory=list)
    failed: list[dict[str, object]] = field(default_factory=list)  # sends the client failed

    def send(
        self,
        producer: pulsar.Producer,
        payload: bytes,
        sequence_id: int,
        key: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        """Send synchronously and record the message with the id the broker assigned."""
        message_id = producer.send(
            payload, properties=properties, partition_key=key, sequence_id=sequence_id
        )
        self._sent(producer, payload, sequence_id, key, properties, message_id)

    def send_async(
        self,
        producer: pulsar.Producer,
        payload: bytes,
        sequence_id: int,
        key: str | None = None,
        properties: dict[str, str] | None = None,
    ) -> None:
        """Queue a message (for batching); its id is recorded when the receipt arrives."""

        def done(result: pulsar.Result, message_id: pulsar.MessageId) -> None:
            if result != pulsar.Result.Ok:
                raise RuntimeError(f"send failed: {result}")
            self._sent(producer, payload, sequence_id, key, properties, message_id)

        producer.send_async(
            payload, done, properties=properties, partition_key=key, sequence_id=sequence_id
        )

    def _sent(
        self,
        producer: pulsar.Producer,
        payload: bytes,
        sequence_id: int,
        key: str | None,
        properties: dict[str, str] | None,
        message_id: pulsar.MessageId,
    ) -> None:
        self.sent.append(
            {
                "topic": producer.topic(),
                "producer_name": producer.producer_name(),
                "sequence_id": sequence_id,
                "key": key,
                "properties": properties or {},
                "size": len(payload),
                "sha256": digest(payload),
                "message_id": message_id_of(message_id),
            }
        )

    def received_message(
        self, consumer: pulsar.Consumer, message: pulsar.Message, action: str
    ) -> None:
        """``action`` is what the application did with it: ack, nack or none."""
        self.received.append(
            {
                "topic": message.topic_name(),
                "subscription": consumer.subscription_name(),
                "consumer_name": consumer.consumer_name(),
                "producer_name": message.producer_name(),
                "message_id": message_id_of(message.message_id()),
                "redelivery_count": message.redelivery_count(),
                "key": message.partition_key() or None,
                "properties": message.properties(),
                "sha256": digest(message.data()),
                "action": action,
            }
        )
