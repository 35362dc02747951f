"""Which frames are requests that a response should answer: the one piece of protocol
knowledge the jobs need that the frames table does not carry.

A response names the request it answers (``answers`` and ``request_ts``, written by the
decoder), so every answered pair comes from the data alone. A request never answered
leaves no such trace: to find it, the jobs must know which commands expect an answer.
The decoders' pairing tables are the source of this one (``SEMANTICS`` in
``decode/pulsar/commands.py``, ``ANSWERED`` in ``decode/kafka07/wire.py``); a test keeps
the two equal, so the jobs need not import the decoder.
"""

from __future__ import annotations

# Pulsar commands a client sends and the broker answers: by request id, SEND by its
# receipt, CONNECT by CONNECTED. A broker-sent CLOSE_PRODUCER / CLOSE_CONSUMER is no request.
PULSAR_CLIENT_REQUESTS = (
    "ADD_PARTITION_TO_TXN",
    "ADD_SUBSCRIPTION_TO_TXN",
    "CLOSE_CONSUMER",
    "CLOSE_PRODUCER",
    "CONNECT",
    "CONSUMER_STATS",
    "END_TXN",
    "END_TXN_ON_PARTITION",
    "END_TXN_ON_SUBSCRIPTION",
    "GET_LAST_MESSAGE_ID",
    "GET_OR_CREATE_SCHEMA",
    "GET_SCHEMA",
    "GET_TOPICS_OF_NAMESPACE",
    "LOOKUP",
    "NEW_TXN",
    "PARTITIONED_METADATA",
    "PRODUCER",
    "SCALABLE_TOPIC_SUBSCRIBE",
    "SEEK",
    "SEND",
    "SUBSCRIBE",
    "TC_CLIENT_CONNECT_REQUEST",
    "UNSUBSCRIBE",
    "WATCH_TOPIC_LIST",
    "WATCH_TOPIC_LIST_CLOSE",
)
PULSAR_BROKER_REQUESTS = ("AUTH_CHALLENGE",)  # answered by the client's AUTH_RESPONSE
PULSAR_EITHER_REQUESTS = ("PING",)  # either side pings; the other answers PONG
PULSAR_ACK = "ACK"  # a request only when it carries a request id (ACK_RESPONSE answers it)

# Kafka 0.7 requests a response answers: PRODUCE and MULTIPRODUCE get none.
KAFKA_REQUESTS = ("FETCH", "MULTIFETCH", "OFFSETS")
