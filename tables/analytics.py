"""Every column of every table the analytics jobs write (``pwcap analyze``, ``jobs/*.py``).

The jobs end each table by selecting these columns in this order, with these types, so the
contract is written once, here, beside the dataset's; ``docs/schema.md`` renders both.
Durations are microseconds; ``window_start`` is the start of the ``--window`` bucket
(1 minute by default) the row's time falls in.
"""

from __future__ import annotations

import pyarrow as pa

from .schema import BOOL, I32, I64, STR, TS, Column

F64 = pa.float64()

_CAPTURE = Column("capture", STR, "the capture (see `frames`)")
_CONN_ID = Column("conn_id", I64, "connection id (see `frames`)")
_TOPIC = Column("topic", STR, "topic")
_SUBSCRIPTION = Column("subscription", STR, "subscription")
_CONSUMER = [
    _CAPTURE,
    Column("conn_id", I64, "connection of the consumer"),
    Column("consumer_id", I64, "consumer id on that connection"),
    _TOPIC,
    _SUBSCRIPTION,
    Column("consumer_name", STR, "consumer name, from SUBSCRIBE"),
]
_RECEIVER_QUEUE = [
    Column("receiver_queue_size", I64, "permits of the consumer's first FLOW: its queue size"),
    Column("refill_permits", I64, "the permits its later FLOWs grant most often"),
]
_MESSAGE_ID = [
    _CAPTURE,
    _TOPIC,
    _SUBSCRIPTION,
    Column("ledger_id", I64, "ledger id of the entry"),
    Column("entry_id", I64, "entry id of the entry"),
]


def _window(what: str) -> Column:
    return Column("window_start", TS, f"start of the time window of the {what}")


LATENCY_PAIRS: list[Column] = [
    Column(
        "kind",
        STR,
        "the request's command name (`LOOKUP`, `PRODUCER`, `SEND`, `PING`, `ACK` with a request"
        " id, Kafka 0.7 `FETCH`...), `publish_delivery` (a message's first SEND to its first"
        " MESSAGE on a subscription) or `delivery_ack` (a delivered entry to the ack answering it)",
    ),
    _CAPTURE,
    Column("conn_id", I64, "connection of the pair (of the delivery, for publish_delivery)"),
    Column("broker", STR, "broker address of that connection, `ip:port` (IPv6 in brackets)"),
    _TOPIC,
    Column("subscription", STR, "subscription, for consumer commands and deliveries"),
    Column("producer_id", I64, "producer id, for producer commands and publish_delivery"),
    Column("consumer_id", I64, "consumer id, for consumer commands and deliveries"),
    Column("sequence_id", I64, "sequence id, for SEND and publish_delivery"),
    Column("request_ts", TS, "capture time of the request (the SEND, the delivery)"),
    Column("response_ts", TS, "capture time of the answer; null when unanswered"),
    Column("latency_us", I64, "response_ts - request_ts; null when unanswered"),
    Column(
        "outcome",
        STR,
        "`success`, `error:<code>` (the answer is an error), `unanswered` (no answer within"
        " the capture) or `redelivered` (delivery_ack: delivered again before any ack)",
    ),
]

LATENCY_SUMMARY: list[Column] = [
    Column("kind", STR, "kind of pair (see `latency_pairs`)"),
    _TOPIC,
    _SUBSCRIPTION,
    Column("broker", STR, "broker address, `ip:port`"),
    _window("request"),
    Column("count", I64, "answered pairs: the ones the percentiles cover"),
    Column("errors", I64, "answered pairs whose answer is an error"),
    Column("unanswered", I64, "requests no answer followed within the capture"),
    Column("redelivered", I64, "deliveries delivered again before any ack (delivery_ack)"),
    Column("min_us", I64, "shortest latency"),
    Column("p50_us", F64, "median latency (exact, interpolated)"),
    Column("p90_us", F64, "90th percentile latency"),
    Column("p99_us", F64, "99th percentile latency"),
    Column("p999_us", F64, "99.9th percentile latency"),
    Column("max_us", I64, "longest latency"),
]

PERMIT_TIMELINE: list[Column] = [
    *_CONSUMER,
    Column("ts", TS, "capture time of the event"),
    Column(
        "event",
        STR,
        "`subscribed` (the broker's SUCCESS to SUBSCRIBE: balance 0), `flow` (a FLOW grant),"
        " `delivery` (a MESSAGE) or `closed` (the client's CLOSE_CONSUMER)",
    ),
    Column("permits", I64, "permits the FLOW granted"),
    Column("messages", I64, "messages the delivered entry spent (a batch spends its size)"),
    Column("balance_before", I64, "permit balance before the event; null when unknown"),
    Column(
        "balance",
        I64,
        "permit balance after the event (negative: the broker overspent with a batch); null"
        " when the SUBSCRIBE is not in the capture",
    ),
]

STARVATION_INTERVALS: list[Column] = [
    *_CONSUMER,
    *_RECEIVER_QUEUE,
    Column("start_ts", TS, "the delivery that brought the balance to zero or below"),
    Column("end_ts", TS, "the event that ended the span, or the connection's last frame"),
    Column("duration_us", I64, "end_ts - start_ts"),
    Column(
        "ended_by",
        STR,
        "`flow` (a FLOW lifted the balance), `closed` (CLOSE_CONSUMER) or `end_of_capture`",
    ),
    Column("flow_to_delivery_us", I64, "from the ending FLOW to the next delivery"),
    Column(
        "backlog_waiting",
        BOOL,
        "the broker delivered within 10 ms of the ending FLOW: messages were waiting, so the"
        " consumer was the bottleneck",
    ),
]

PERMIT_SUMMARY: list[Column] = [
    *_CONSUMER,
    Column("first_ts", TS, "the consumer's first event"),
    Column("last_ts", TS, "the consumer's last event"),
    Column("balance_known", BOOL, "its SUBSCRIBE is in the capture, so the balance is known"),
    *_RECEIVER_QUEUE,
    Column("refills", I64, "FLOWs after the first"),
    Column("flows", I64, "FLOWs"),
    Column("permits_granted", I64, "permits all FLOWs granted"),
    Column("entries_delivered", I64, "MESSAGE frames delivered"),
    Column("messages_delivered", I64, "messages delivered (a batch counts its size)"),
    Column("starvation_spans", I64, "rows of `starvation_intervals` for the consumer"),
    Column("starved_us", I64, "their total duration"),
    Column("longest_starvation_us", I64, "the longest of them"),
    Column("spans_with_backlog_waiting", I64, "spans ended by a FLOW with backlog waiting"),
    Column(
        "starved_fraction",
        F64,
        "starved_us over the consumer's life (first event to CLOSE_CONSUMER or connection end)",
    ),
    Column("deliveries_beyond_permits", I64, "deliveries made at a balance of zero or below"),
]

REDELIVERIES: list[Column] = [
    *_MESSAGE_ID,
    Column("partition", I32, "partition of the message id; -1 when not partitioned"),
    Column("batch_index", I32, "position in its batch; -1 for a message sent alone"),
    Column("conn_id", I64, "connection of this delivery"),
    Column("consumer_id", I64, "consumer of this delivery"),
    Column("consumer_name", STR, "its name"),
    Column("ts", TS, "capture time of this delivery"),
    Column("delivery_number", I32, "1 for the first delivery on the subscription, then 2, 3..."),
    Column("deliveries", I64, "deliveries of the message on the subscription"),
    Column("redelivery_count", I32, "redelivery count the broker sent (0 when absent)"),
    Column(
        "trigger",
        STR,
        "what the wire shows between the previous delivery and this one, first match wins:"
        " `redeliver_ids` (a REDELIVER_UNACKNOWLEDGED_MESSAGES naming the entry),"
        " `redeliver_all` (one naming no ids), `seek`, `reconnect` (a new SUBSCRIBE, or the"
        " previous delivery's connection ended), `none_visible`; null on the first delivery",
    ),
    Column("since_first_delivery_us", I64, "time since the first delivery; null on the first"),
]

REDELIVERY_SUMMARY: list[Column] = [
    _CAPTURE,
    _TOPIC,
    _SUBSCRIPTION,
    _window("delivery or command"),
    Column("deliveries", I64, "message deliveries (one per message of a batch)"),
    Column("redeliveries", I64, "deliveries of a message delivered before"),
    Column("redelivery_rate", F64, "redeliveries / deliveries; null without deliveries"),
    Column("max_redelivery_count", I32, "highest redelivery count the broker sent"),
    Column("redeliver_with_ids", I64, "REDELIVER_UNACKNOWLEDGED_MESSAGES naming message ids"),
    Column("redeliver_all", I64, "REDELIVER_UNACKNOWLEDGED_MESSAGES naming none (redeliver all)"),
    Column(
        "ack_validation_errors",
        pa.map_(STR, I64),
        "ACKs with a validation error, by error name",
    ),
]

UNACKED: list[Column] = [
    *_MESSAGE_ID,
    Column("partition", I32, "partition of the message id"),
    Column("num_messages", I32, "messages in the entry"),
    Column("conn_id", I64, "connection of the last delivery"),
    Column("consumer_id", I64, "consumer of the last delivery"),
    Column("consumer_name", STR, "its name"),
    Column("last_delivery_ts", TS, "capture time of the last delivery, which no ack answered"),
    Column("deliveries", I32, "deliveries of the entry on the subscription"),
    Column("redelivery_count", I32, "redelivery count of the last delivery"),
]

ANALYTICS: dict[str, list[Column]] = {
    "latency_pairs": LATENCY_PAIRS,
    "latency_summary": LATENCY_SUMMARY,
    "permit_timeline": PERMIT_TIMELINE,
    "starvation_intervals": STARVATION_INTERVALS,
    "permit_summary": PERMIT_SUMMARY,
    "redeliveries": REDELIVERIES,
    "redelivery_summary": REDELIVERY_SUMMARY,
    "unacked": UNACKED,
}
