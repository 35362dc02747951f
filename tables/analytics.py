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
        " MESSAGE on a subscription) or `delivery_ack` (a delivered entry to the ack answering"
        " it: of a batch acknowledged member by member, the one that acknowledges the last"
        " member owed)",
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
    Column(
        "network_us",
        I64,
        "the network's share of latency_us: the shortest TCP round trip from the capture"
        " point to the side that answers and back (`connections.tcp_rtt_*`: the broker for"
        " a request, the client for a delivery); null for publish_delivery and PING, and"
        " when the connection timed no round trip",
    ),
    Column(
        "remote_us",
        I64,
        "latency_us less network_us (at least 0): the time the answering side (broker or"
        " client) took itself",
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
    Column("previous_ts", TS, "capture time of the delivery before this one; null on the first"),
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
    Column(
        "last_delivery_ts",
        TS,
        "capture time of the last delivery, which no ack answered (a batch acknowledged"
        " only in part is not answered)",
    ),
    Column("deliveries", I32, "deliveries of the entry on the subscription"),
    Column("redelivery_count", I32, "redelivery count of the last delivery"),
]

# The thresholds of the findings (``jobs/findings.py``), named once: the kinds' definitions
# below quote them, the job applies them.
THRESHOLDS: dict[str, float] = {
    "starved_fraction": 0.2,  # of a consumer's life with no permits and messages waiting
    "starved_seconds": 1.0,  # ... and at least this long in all
    "slow_ack_us": 100_000,  # a median delivery -> ack this long: the application is slow
    "small_queue": 100,  # a receiver queue below this many permits is small
    "key_shared_stall_us": 1_000_000,  # a Key_Shared consumer's span without permits
    "storm_redeliveries": 100,  # redeliveries of one subscription within `storm_window_s`...
    "storm_rate": 0.5,  # ... that are at least this share of its deliveries
    "ack_timeout_floor_us": 1_000_000,  # no client times acks out sooner (Java's minimum)
    "default_nack_delay_us": 60_000_000,  # the Java, Go and C++ clients' negative-ack delay
    "send_timeout_us": 30_000_000,  # the clients' default send timeout
    "storm_connects": 5,  # connections of one client address within `storm_window_s`
    "storm_lookups": 5,  # LOOKUPs of one topic by one client address within it that...
    "lookups_per_attach": 2,  # ... the producers and consumers it attached do not explain
    "storm_window_s": 60,
    "chunk_stall_us": 1_000_000,  # between two chunks of one message
    "zero_window_us": 100_000,  # zero-window time of one side of a connection, in all
    "retransmission_burst": 3,  # retransmitted segments within a second
    "slow_rtt_us": 100_000,  # the shortest round trip of a path (its own delay)
    "slow_remote_us": 1_000_000,  # a request's p99 time at the broker, network time apart
}
_T = THRESHOLDS

# Every finding `kind`, what it means and when it is found: the docs render this.
FINDING_KINDS: dict[str, str] = {
    "permit_starvation": "a consumer had no permits while the broker had messages for it:"
    " the spans at a balance of zero or below during which messages waited for it (a FLOW"
    " ended the span with a delivery within 10 ms, `starvation_intervals.backlog_waiting`;"
    " or the first entry delivered to it after the span was in the topic before the span"
    " began: the topic had delivered it or a later entry, to any subscription, by then; a"
    " dispatcher may take longer than 10 ms to deliver, as a Key_Shared one replaying"
    " entries it could not dispatch does) add up to at least"
    f" {_T['starved_fraction']:.0%} of its life and {_T['starved_seconds']:g} s. `cause`:"
    " `batch_over_permits` (its entries average at least half its receiver queue in"
    f" messages), `slow_acknowledgement` (median delivery -> ack at least"
    f" {_T['slow_ack_us'] / 1000:g} ms: the application takes long per message), else"
    f" `receiver_queue` (the queue, from its first FLOW, is the limit)",
    "key_shared_stall": "a consumer of a Key_Shared subscription had no permits for at"
    f" least {_T['key_shared_stall_us'] / 1e6:g} s while messages for its keys waited (as"
    " for `permit_starvation`, from the deliveries of the topic's Key_Shared"
    " subscriptions) and another consumer of the"
    " subscription, subscribed throughout, had permits (no span of its own) and was"
    " delivered nothing: the broker keeps a key's messages for the consumer its hash"
    " belongs to, so the keys hashed to the starved one stalled. Its keys' hashes are"
    " computed as the broker's (Murmur3 32 of the ordering key, else the partition key,"
    " into 0..65535); `cause` is the subscription's mode (`AUTO_SPLIT` or `STICKY`)",
    "redelivery": "messages of a subscription delivered again, by cause (`cause`), from"
    " `redeliveries.trigger` and the REDELIVER_UNACKNOWLEDGED_MESSAGES before them (no field"
    " of it says why; its age is how long the youngest delivery it covers, or for one"
    " naming none the consumer's latest, had been held): `consumer_epoch` (a request naming"
    " none whose `consumer_epoch` is above the consumer's before: it asked for everything"
    " unacknowledged again, as the Java client's ack timeout, negative acks and"
    " application do on Exclusive and Failover subscriptions), `application` (a request"
    " naming none on a Shared or Key_Shared subscription, where the clients' ack timeouts"
    " and negative acks name their messages: the application asked), `negative_ack` (its"
    f" age is under {_T['ack_timeout_floor_us'] / 1e6:g} s, sooner than any client times"
    " acknowledgements out, or the consumer ever asked that soon; or the consumer then held"
    " an older delivery neither acknowledged nor asked for, which an ack timeout, taking"
    " every delivery held that long oldest first, would have asked for; or its age is"
    f" between {_T['default_nack_delay_us'] / 1e6:g} s, the clients' default negative-ack"
    " delay, and a third more plus"
    f" {_T['ack_timeout_floor_us'] / 1e6:g} s, the clients' timer ticks), `ack_timeout`"
    " (any other request: a negative ack with a delay set between those, from a consumer"
    " that never asked sooner, looks the same on the wire and is counted here), `reconnect`"
    " (a new SUBSCRIBE or the connection ended), `unexplained` (no cause on the wire: the"
    " broker's own, or the capture missed it). Redeliveries a SEEK asked for are no finding",
    "redelivery_storm": f"a subscription redelivered at least {_T['storm_redeliveries']:g}"
    f" messages within {_T['storm_window_s']:g} s (any {_T['storm_window_s']:g} s), and"
    f" redeliveries are {_T['storm_rate']:.0%} or more of its deliveries (seeks apart)",
    "ack_lost_on_reconnect": "messages the client acknowledged that were delivered again"
    " after a reconnect: the acknowledgement did not reach the broker before the connection"
    " ended (a batch-index acknowledgement acks only the members its ack_set clears)",
    "ack_hole": "entries a subscription left unacknowledged behind later entries it"
    " acknowledged, still so when its consumer closed or the capture ended (`unacked`),"
    " and batches acknowledged in part by batch-index acknowledgements (the members every"
    " ACK of the entry left set in its ack_set, `frames.unacked_in_batch`) that the"
    " subscription acknowledged past: the broker keeps them, and the backlog's start,"
    " until they are acknowledged",
    "send_unreceipted": "SENDs no receipt or error answered, though the producer closed,"
    f" its connection ended, or the capture went on {_T['send_timeout_us'] / 1e6:g} s"
    " (the clients' default send timeout) after them; not on a connection the capture"
    " lost bytes of (`connections.gaps`), where the receipts may be what was lost",
    "slow_receipt": f"SENDs answered after more than {_T['send_timeout_us'] / 1e6:g} s (the"
    " clients' default send timeout: the application was told they failed)",
    "send_error": "SEND_ERRORs, by error code (`cause`)",
    "error": "error answers (ERROR, or a response carrying an error code) to one client"
    " address, by code (`cause`: ServiceNotReady, TooManyRequests, AuthenticationError...)",
    "connect_storm": f"at least {_T['storm_connects']:g} Pulsar connections opened by one"
    f" client address to one broker within {_T['storm_window_s']:g} s (a client keeps one"
    " connection per broker: more is a reconnect loop, or a client made per message)",
    "lookup_storm": f"at least {_T['storm_lookups']:g} LOOKUPs of one topic by one client"
    f" address within {_T['storm_window_s']:g} s beyond {_T['lookups_per_attach']:g} per"
    f" producer or consumer it attached to the topic within {_T['storm_window_s']:g} s"
    " either side (a client looks a topic up to attach one, a Redirect answer adding a"
    " lookup of the owner: the others led nowhere, answered with an error or retried)",
    "topic_unload": "the broker closed producers or consumers of a topic itself"
    " (CLOSE_PRODUCER / CLOSE_CONSUMER from the broker: the topic was unloaded or moved),"
    " with the clients' reconnection after it",
    "chunk_incomplete": "chunked messages (by producer and uuid) some of whose chunks were"
    " sent or delivered and the last never was",
    "chunk_stall": f"chunked messages with more than {_T['chunk_stall_us'] / 1e6:g} s"
    " between two of their chunks",
    "zero_window": "a side of a connection advertised a zero TCP window (it stopped reading"
    f" its socket) for at least {_T['zero_window_us'] / 1000:g} ms in all",
    "retransmission_burst": f"at least {_T['retransmission_burst']:g} TCP segments of one"
    " side sent again within a second (the capture saw both copies)",
    "slow_network": "the shortest round trip from the capture point to a side and back"
    f" (handshake or ACK) is at least {_T['slow_rtt_us'] / 1000:g} ms",
    "slow_broker": "a kind of request whose 99th percentile time at the broker (its"
    " latency less the network round trip to the broker, `latency_pairs.remote_us`) is"
    f" at least {_T['slow_remote_us'] / 1e6:g} s",
}

SEVERITIES = ("high", "medium", "low")

FINDINGS: list[Column] = [
    Column("rank", I32, "1 for the most severe finding of the capture(s), then 2, 3..."),
    Column("kind", STR, "what the problem is: one of the kinds listed below the tables"),
    Column(
        "severity",
        STR,
        "`high` (the problem stops or loses work), `medium` (it slows work down) or `low`",
    ),
    Column("score", F64, "how much of the traffic concerned it touched, 0 to 1: ranks ties"),
    Column("cause", STR, "the likely cause, where the kind tells causes apart"),
    _CAPTURE,
    Column("start_ts", TS, "when the problem was first seen"),
    Column("end_ts", TS, "when it was last seen"),
    Column("conn_id", I64, "the connection concerned, when one is"),
    Column(
        "client",
        STR,
        "client address of that connection, `ip:port`; the client's IP address alone for a"
        " finding about all its connections (errors, storms)",
    ),
    Column("broker", STR, "broker address, `ip:port`"),
    _TOPIC,
    _SUBSCRIPTION,
    Column("producer_id", I64, "producer concerned, on that connection"),
    Column("producer_name", STR, "its name"),
    Column("consumer_id", I64, "consumer concerned, on that connection"),
    Column("consumer_name", STR, "its name"),
    Column("count", I64, "occurrences: spans, messages, errors, connections..."),
    Column("duration_us", I64, "time the problem lasted in all, where it has a length"),
    Column("explanation", STR, "one sentence naming the problem with the numbers that prove it"),
    Column(
        "evidence",
        pa.list_(STR),
        "the tables holding the evidence: their rows with this row's capture and each of"
        " its `conn_id`, `consumer_id`, `producer_id`, `topic`, `subscription` that is"
        " set, in the time from `start_ts` to `end_ts`",
    ),
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
    "findings": FINDINGS,
}
