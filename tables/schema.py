"""Every column of every table pwcap writes: its name, Arrow type and meaning.

This module is the single place the dataset is documented; ``docs/schema.md`` is
generated from it (``python -m pwcap.tables.schema > docs/schema.md``) and a test keeps
the two equal. Column names are a public contract that dashboards and the Spark jobs
rely on: add columns freely, never rename or repurpose one.

Conventions: timestamps are capture timestamps, UTC, microseconds. Ids are int64 (Spark
has no unsigned 64-bit type; Pulsar ids never reach 2**63 in practice). Every row carries
``capture`` and ``conn_id`` so tables join on ``conn_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

Row = dict[str, Any]  # one whole row: column name -> value (absent: null)

TS = pa.timestamp("us", tz="UTC")
STR = pa.string()
I32 = pa.int32()
I64 = pa.int64()
BOOL = pa.bool_()
MESSAGE_IDS = pa.list_(
    pa.struct([("ledger_id", I64), ("entry_id", I64), ("partition", I32), ("batch_index", I32)])
)
ACK_SETS = pa.list_(pa.struct([("id", I32), ("word", I32), ("bits", I64)]))
HASH_RANGES = pa.list_(pa.struct([("start", I32), ("end", I32)]))


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: pa.DataType
    doc: str


def _common(what: str, protocols: str = "`pulsar` or `kafka07`") -> list[Column]:
    return [
        Column("ts", TS, f"capture time of the last byte of the {what}"),
        Column(
            "capture",
            STR,
            "the capture the row came from: its path below the folder or glob given to"
            " `pwcap decode` (its file name when given directly; `-` for standard input)",
        ),
        Column(
            "conn_id",
            I64,
            "connection id, unique per (capture, connection) and stable across runs: a hash"
            " of the capture's name, both endpoints and the connection's first packet time",
        ),
        Column("direction", STR, "`c2b` (client to broker) or `b2c` (broker to client)"),
        Column("protocol", STR, protocols),
    ]


FRAMES: list[Column] = [
    *_common("frame"),
    Column("ts_first", TS, "capture time of the first byte of the frame"),
    Column("stream_offset", I64, "offset of the frame's first byte in its direction's stream"),
    Column(
        "command",
        STR,
        "command name as the protocol spells it (`SEND`, `FLOW`, `FETCH`...); "
        "null when the type number is unknown",
    ),
    Column("command_type", I32, "the command's type number on the wire"),
    Column("frame_size", I32, "bytes of the whole frame on the wire, including its length prefix"),
    Column("payload_size", I32, "bytes after the command: metadata + payload, or message set"),
    Column("request_id", I64, "request id (Pulsar) the command carries"),
    Column("producer_id", I64, "producer id"),
    Column("consumer_id", I64, "consumer id"),
    Column("sequence_id", I64, "producer sequence id (SEND, SEND_RECEIPT, SEND_ERROR)"),
    Column("highest_sequence_id", I64, "highest sequence id of a batch send or receipt"),
    Column("ledger_id", I64, "ledger id of the message id the command carries"),
    Column("entry_id", I64, "entry id of the message id the command carries"),
    Column("partition", I32, "partition of the message id (Pulsar) or of the request (Kafka)"),
    Column("batch_index", I32, "batch index of the message id; null when not a batch"),
    Column("num_message_ids", I32, "message ids listed (ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES)"),
    Column(
        "message_ids",
        MESSAGE_IDS,
        "every message id a list-carrying command names (ACK, REDELIVER_UNACKNOWLEDGED_MESSAGES);"
        " the scalar id columns hold only the first",
    ),
    Column(
        "ack_sets",
        ACK_SETS,
        "batch-index acknowledgement: the ack_set of each of an ACK's `message_ids` that"
        " carries one (`id`: the id's place in `message_ids`, from 0), or a MESSAGE's own"
        " (`id` 0: the members acked before, not delivered); `word` is the place of a 64-bit word"
        " of the set and `bits` the word: batch index 64 * w + i is not acknowledged when bit i"
        " of word w is set, and is when it is clear or past the last word",
    ),
    Column("permits", I64, "permits granted by a FLOW"),
    Column("redelivery_count", I32, "redelivery count of a MESSAGE"),
    Column("num_messages", I32, "messages in the entry (SEND, MESSAGE) or message set"),
    Column(
        "acked_in_batch",
        I32,
        "MESSAGE: batch indexes its ack_set marks acknowledged already (not delivered)",
    ),
    Column(
        "unacked_in_batch",
        MESSAGE_IDS,
        "ACK: per listed id with an ack_set (a batch-index acknowledgement), the batch members"
        " whose bit it leaves set (not acknowledged), as ids with their batch index",
    ),
    Column(
        "consumer_epoch",
        I64,
        "consumer epoch of a SUBSCRIBE, REDELIVER_UNACKNOWLEDGED_MESSAGES or MESSAGE",
    ),
    Column("key_shared_mode", STR, "SUBSCRIBE to a Key_Shared subscription: AUTO_SPLIT or STICKY"),
    Column(
        "hash_ranges",
        HASH_RANGES,
        "SUBSCRIBE, STICKY mode: the key hash ranges the consumer asks for (inclusive)",
    ),
    Column("topic", STR, "topic the command concerns, from the command or connection state"),
    Column("subscription", STR, "subscription, from SUBSCRIBE state for consumer commands"),
    Column("sub_type", STR, "subscription type (Exclusive, Shared, Failover, Key_Shared)"),
    Column("producer_name", STR, "producer name, from PRODUCER / PRODUCER_SUCCESS state"),
    Column("consumer_name", STR, "consumer name, from SUBSCRIBE state"),
    Column("ack_type", STR, "`Individual` or `Cumulative` for ACK"),
    Column("validation_error", STR, "ACK validation error name, when the client set one"),
    Column("error_code", STR, "error name (ServerError for Pulsar, error code name for Kafka)"),
    Column("error_message", STR, "error text sent with an error"),
    Column("answers", STR, "for a response: the command name of the request it answers"),
    Column("request_ts", TS, "for a response: capture time of the request it answers"),
    Column("checksum_ok", BOOL, "payload checksum verified (null when the frame has none)"),
    Column("compression", STR, "payload compression (NONE, LZ4, ZLIB, ZSTD, SNAPPY, GZIP)"),
    Column("broker_timestamp", TS, "broker entry metadata timestamp (MESSAGE)"),
    Column("broker_index", I64, "broker entry metadata index (MESSAGE)"),
    Column("txnid_most_bits", I64, "transaction id, most significant bits"),
    Column("txnid_least_bits", I64, "transaction id, least significant bits"),
    Column("offset", I64, "Kafka 0.7 log byte offset of a request"),
    Column("max_size", I32, "Kafka 0.7 FETCH maximum bytes"),
    Column(
        "truncated_tail",
        I32,
        "Kafka 0.7 FETCH / MULTIFETCH response: bytes of the partial message ending the message"
        " set(s); normal (the broker cuts the log at MAX_SIZE), not an error",
    ),
    Column("info", STR, "short human summary of the frame's other fields"),
]

MESSAGES: list[Column] = [
    *_common("frame that carried the message"),
    Column("stream_offset", I64, "offset of the carrying frame in its direction's stream"),
    Column("command", STR, "carrying command (`SEND`, `MESSAGE`, `PRODUCE`, `FETCH`...)"),
    Column("topic", STR, "topic"),
    Column("subscription", STR, "subscription the message was delivered on (MESSAGE)"),
    Column("consumer_id", I64, "consumer the message was delivered to (MESSAGE)"),
    Column("consumer_name", STR, "name of that consumer"),
    Column("producer_id", I64, "producer id on the sending connection (SEND)"),
    Column("producer_name", STR, "producer name from the message metadata"),
    Column("sequence_id", I64, "sequence id of this message (batch members get their own)"),
    Column("publish_time", TS, "publish time from the message metadata"),
    Column("event_time", TS, "event time set by the application, null when unset"),
    Column("key", STR, "partition key"),
    Column("ordering_key", pa.binary(), "ordering key bytes, when set"),
    Column("properties", pa.map_(STR, STR), "message properties"),
    Column("compression", STR, "compression of the entry the message came in"),
    Column("batch_index", I32, "position in its batch; null for a message sent alone"),
    Column("batch_size", I32, "messages in the entry"),
    Column("ledger_id", I64, "ledger id of the entry (MESSAGE, or SEND_RECEIPT matched later)"),
    Column("entry_id", I64, "entry id of the entry"),
    Column("partition", I32, "partition of the message id (Pulsar) or of the Kafka request"),
    Column("offset", I64, "Kafka 0.7 log byte offset of the message"),
    Column("redelivery_count", I32, "redelivery count the broker sent with it (MESSAGE)"),
    Column("payload_size", I32, "bytes of the application payload after decompression"),
    Column("payload_sha256", STR, "hex SHA-256 of the application payload"),
    Column(
        "payload",
        pa.binary(),
        "the application payload (only with `--payloads`); its first 8 MiB when longer"
        " (`payload_size` and `payload_sha256` are of the whole)",
    ),
    Column("checksum_ok", BOOL, "entry checksum (Pulsar CRC32-C, Kafka CRC32) verified"),
    Column("magic", I32, "Kafka 0.7 message magic byte"),
    Column("encrypted", BOOL, "payload is encrypted (not decrypted; digest is of ciphertext)"),
    Column("null_value", BOOL, "the message has a null value"),
    Column("chunk_id", I32, "chunk number of a chunked message"),
    Column("num_chunks", I32, "chunks the chunked message was split into"),
    Column("total_chunk_size", I32, "size of the whole chunked message"),
    Column("uuid", STR, "chunked message uuid"),
    Column(
        "chunked_sha256",
        STR,
        "on the last chunk: hex SHA-256 of the reassembled message, when every chunk was seen",
    ),
    Column("broker_timestamp", TS, "broker entry metadata timestamp"),
    Column("broker_index", I64, "broker entry metadata index"),
    Column("replicated_from", STR, "source cluster of a replicated message"),
]


def _tcp_columns() -> list[Column]:
    """What the connection's TCP segments show, measured at the capture point
    (``capture/tcpflow.py``): round trips to each side, windows, retransmissions."""
    columns = []
    handshakes = {
        "broker": "client's SYN to the broker's SYN-ACK",
        "client": "broker's SYN-ACK to the client's ACK of it",
    }
    for peer, sender in (("broker", "client"), ("client", "broker")):
        columns += [
            Column(
                f"tcp_rtt_{peer}_handshake_us",
                I64,
                f"the {handshakes[peer]}: the round trip from the capture point to the"
                f" {peer} and back; null without the handshake",
            ),
            Column(
                f"tcp_rtt_{peer}_samples",
                I64,
                f"round trips to the {peer} timed from the {sender}'s data to the {peer}'s"
                " acknowledgement of it (one segment timed at a time; none sent again)",
            ),
            Column(f"tcp_rtt_{peer}_min_us", I64, "the shortest of them: the path's own delay"),
            Column(f"tcp_rtt_{peer}_mean_us", I64, "their mean (delayed ACKs lengthen some)"),
            Column(f"tcp_rtt_{peer}_max_us", I64, "the longest of them"),
        ]
    for side in ("client", "broker"):
        columns += [
            Column(
                f"tcp_window_scale_{side}",
                I64,
                f"window scale option of the {side}'s SYN; null when absent or not seen",
            ),
            Column(
                f"tcp_min_window_{side}",
                I64,
                f"the smallest receive window the {side} advertised, in bytes (scaled when"
                " both SYNs offered scaling)",
            ),
            Column(
                f"tcp_zero_windows_{side}",
                I64,
                f"times the {side} advertised a zero window: its socket buffer was full, its"
                " application not reading",
            ),
            Column(
                f"tcp_zero_window_us_{side}",
                I64,
                "their total length: each from the first segment with a zero window to the"
                " next with an open one (or the side's last segment)",
            ),
            Column(f"tcp_longest_zero_window_us_{side}", I64, "the longest of them"),
            Column(f"tcp_longest_zero_window_ts_{side}", TS, "when it began"),
            Column(
                f"tcp_retransmissions_{side}",
                I64,
                f"segments the {side} sent carrying bytes the capture had already seen (a"
                " loss between the capture point and the receiver, or a spurious resend)",
            ),
            Column(f"tcp_retransmitted_bytes_{side}", I64, "bytes those segments sent again"),
            Column(
                f"tcp_retransmission_burst_{side}",
                I64,
                "the most of them within one second (counted from the first of the second)",
            ),
            Column(f"tcp_retransmission_burst_ts_{side}", TS, "when that second began"),
        ]
    return columns


_TCP_COLUMNS = _tcp_columns()


CONNECTIONS: list[Column] = [
    Column("conn_id", I64, "connection id (see `frames`)"),
    Column("capture", STR, "the capture (see `frames`)"),
    Column(
        "protocol",
        STR,
        "`pulsar`, `kafka07`, `tls` (encrypted, not decrypted) or `unknown`; a TLS"
        " connection that was decrypted is named by what its plaintext speaks",
    ),
    Column("client_ip", STR, "client address"),
    Column("client_port", I32, "client port"),
    Column("server_ip", STR, "broker address"),
    Column("server_port", I32, "broker port"),
    Column(
        "encapsulation",
        STR,
        "the tunnels and tags the connection was carried in, outermost first, each a kind"
        " and its id: `vlan:100`, `vxlan:4242`, `geneve:7`, `gre:5` (its key), `erspan:12`"
        " (the mirror session), and without an id `gre`, `erspan` (type I), `mpls` (labels"
        " change hop by hop and per direction) and `ipip` (IP in IP); e.g."
        " `vxlan:4242/vlan:100`. Empty when bare. Part of the connection's identity: the"
        " same endpoints in two encapsulations are two connections",
    ),
    Column(
        "client_by",
        STR,
        "how the client side was decided: `syn`, `port`, `content`, `guess` "
        "(no handshake, no known port: the lower port taken as the server)",
    ),
    Column("client_version", STR, "client version string from CONNECT"),
    Column("server_version", STR, "server version string from CONNECTED"),
    Column("protocol_version", I32, "protocol version agreed in CONNECT / CONNECTED"),
    Column("auth_method", STR, "authentication method name; never the credential"),
    Column("auth_data_size", I32, "bytes of auth data the client sent (the data is never kept)"),
    Column("first_ts", TS, "first packet of the connection"),
    Column("last_ts", TS, "last packet of the connection"),
    Column("bytes_c2b", I64, "stream bytes captured client to broker"),
    Column("bytes_b2c", I64, "stream bytes captured broker to client"),
    Column("frames_c2b", I64, "frames decoded client to broker"),
    Column("frames_b2c", I64, "frames decoded broker to client"),
    Column("gaps", I32, "gaps (missing byte ranges) in the streams"),
    Column("gap_bytes", I64, "bytes missing from the streams"),
    Column("anomalies", I32, "anomaly rows for this connection"),
    Column("close_reason", STR, "`fin`, `rst`, `reused`, `evicted` or `end_of_capture`"),
    Column(
        "midstream",
        BOOL,
        "the capture joined the connection after it began (no SYN seen): what came before,"
        " such as the names behind ids and the requests answered later, is unknown",
    ),
    Column(
        "flipped",
        BOOL,
        "the content proved the roles the other way round from the packets' first"
        " guess (no handshake seen), so client and server were exchanged: `client_by`"
        " is then `content`",
    ),
    # TLS: read from the handshake, with keys or without; null for a plaintext connection.
    Column("tls_version", STR, "TLS version the server chose (`TLS 1.2`, `TLS 1.3`...)"),
    Column("tls_cipher", STR, "cipher suite the server chose, by its IANA name"),
    Column("tls_sni", STR, "server name the client asked for (SNI)"),
    Column("tls_alpn", STR, "application protocols the client offered (ALPN), comma-separated"),
    Column(
        "tls_client_cert",
        BOOL,
        "the client sent a certificate (mutual TLS); null when unknown (TLS 1.3 carries it"
        " encrypted: known only with the keys)",
    ),
    Column("tls_resumed", BOOL, "the handshake resumed an earlier session (id, ticket, PSK)"),
    Column(
        "tls_status",
        STR,
        "`decrypted`, or why not: `no_keys` (no secret for the session), `handshake_missing`"
        " (the capture lacks the handshake), `wrong_keys` (no record authenticated with the"
        " secret given), `unsupported` (a version or suite pwcap does not decrypt),"
        " `handshake_failed` (the server refused the ClientHello or never answered)",
    ),
    Column("tls_decrypted", BOOL, "its records were decrypted and decoded as its byte stream"),
    *_TCP_COLUMNS,
]

# Every anomaly `kind` pwcap writes, by family, and what it means. The fuzz campaign
# checks that no other value ever appears.
ANOMALY_KINDS: dict[str, dict[str, str]] = {
    "capture file (no connection; `size` counts the records or blocks)": {
        "truncated_capture": "the capture ends inside a record, or in damage after which no"
        " record boundary can be trusted; everything before it was decoded",
        "bad_timestamp": "pcapng records timed outside the years 1970-9999; each took the time"
        " of the record before it",
        "bad_block": "damaged pcapng blocks skipped one by one (too short for their fields, a"
        " packet longer than its block, an interface never declared)",
        "unsupported_link_type": "records of a link layer pwcap does not parse, skipped",
        "truncated_header": "records the snaplen (or a mirror's truncation) cut before their"
        " TCP header, skipped",
        "incomplete_datagram": "fragmented IP datagrams never completed: fragments lost or cut,"
        " overlapping (dropped, as receivers drop them), or held past the time and memory"
        " bounds",
        "too_deep": "records with more nested headers or tunnel ids than pwcap reads, skipped",
    },
    "stream": {
        "gap": "bytes the capture missed (or bytes given up on: more were held waiting for"
        " them than the memory budget allows)",
        "resync": "bytes skipped to the next frame boundary",
        "midstream": "the capture joined this direction after the connection began: the bytes"
        " before it are unknown (one per direction that carried data)",
    },
    "connection": {
        "not_decoded": "a connection that carried bytes pwcap does not decode: TLS (encrypted)"
        " or no protocol it knows (`protocol` says which), none recognised before the"
        " connections still undecided held more of their first bytes than memory allows, or"
        " none of its bytes in the capture (a snaplen keeping headers alone)",
        "evicted": "a connection closed while still open because too many were open at once"
        " (it had been idle longest); a later segment of it starts another connection",
    },
    "framing": {
        "truncated_frame": "a frame cut by a gap or by the end of the stream, or given up"
        " while incomplete because the incomplete frames of all connections held more than"
        " the memory budget (the rest of it is skipped)",
        "oversize_frame": "a frame over `--max-frame-size`, skipped",
        "bad_frame_header": "sizes no frame can have",
    },
    "content": {
        "bad_protobuf": "a command or metadata that does not decode",
        "bad_payload": "a payload frame whose metadata sizes do not fit the frame",
        "unknown_command": "a command type the protocol does not define",
        "bad_checksum": "CRC32-C (Pulsar) or CRC32 (Kafka 0.7) mismatch",
        "bad_magic": "a Kafka 0.7 message magic other than 0 or 1",
        "bad_batch": "a batch whose messages do not fit its bytes, or fewer than it declares",
        "bad_message": "a damaged Kafka 0.7 message, stepped over",
        "decompression_failed": "a payload that does not decompress within the limits",
        "chunk_missing": "a chunked message ended without all its chunks",
        "chunk_evicted": "too many chunked messages open at once",
        "decode_error": "a frame whose fields break the decoder's expectations; the frame is"
        " skipped and decoding goes on",
    },
    "conversation": {
        "protocol_violation": "a peer broke the protocol (a MESSAGE beyond the permits...)",
        "unmatched_response": "a response whose request was never sent",
        "pairing_lost": "Kafka 0.7: a gap broke in-order request/response pairing",
    },
    "tls (`stream_offset` and `size` count the encrypted stream's bytes)": {
        "tls_no_keys": "a TLS session with no secret in the key logs (or none given): its"
        " version, SNI and suite are in the detail; one per connection",
        "tls_handshake_missing": "TLS whose handshake the capture lacks (it began later, or"
        " lost it): the session cannot be known, so it is not decrypted",
        "tls_auth_failed": "a TLS record that did not authenticate (a wrong secret, or"
        " damage): its direction resumes at the next record that authenticates",
        "tls_bad_record": "a TLS record header or handshake message no peer sends",
        "tls_truncated": "the stream ended inside a TLS record",
        "tls_unsupported": "a TLS version or cipher suite pwcap does not decrypt",
        "tls_handshake_failed": "a TLS handshake that never completed: the server refused"
        " the ClientHello (the alert is in the detail) or never answered it",
    },
}
KINDS = frozenset(kind for family in ANOMALY_KINDS.values() for kind in family)

ANOMALIES: list[Column] = [
    *_common(
        "stream position where the anomaly was found",
        "`pulsar` or `kafka07`; `tls` or `unknown` for `not_decoded`",
    ),
    Column("kind", STR, "what went wrong: one of the kinds listed below the tables"),
    Column("stream_offset", I64, "offset in the direction's stream (null if not stream-bound)"),
    Column("size", I64, "bytes concerned (missing, skipped, or the frame's size)"),
    Column("command", STR, "command of the frame concerned, when known"),
    Column("detail", STR, "human explanation"),
]

TABLES: dict[str, list[Column]] = {
    "frames": FRAMES,
    "messages": MESSAGES,
    "connections": CONNECTIONS,
    "anomalies": ANOMALIES,
}


# Parquet needs several times a value's size to write it: a longer payload keeps its head.
KEPT_PAYLOAD_BYTES = 8 << 20


def kept_payload(payload: bytes | memoryview) -> bytes:
    """What the `payload` column holds of a message's payload."""
    return bytes(payload[:KEPT_PAYLOAD_BYTES])


def arrow_schema(table: str) -> pa.Schema:
    return pa.schema([pa.field(c.name, c.type) for c in TABLES[table]])


def position(table: str, column: str) -> int:
    """Where ``column`` is in ``table``: how a row builder (:mod:`pwcap.tables.columns`)
    names it, resolved once by each decoder."""
    return [c.name for c in TABLES[table]].index(column)


def positions(table: str, *columns: str) -> tuple[int, ...]:
    """:func:`position` of each of ``columns``."""
    return tuple(position(table, column) for column in columns)


def markdown() -> str:
    """The reference of every table pwcap writes, as ``docs/schema.md`` holds it."""
    from .analytics import ANALYTICS, FINDING_KINDS  # built on these columns

    lines = [
        "# pwcap table columns",
        "",
        "Generated from `tables/schema.py` and `tables/analytics.py` by",
        "`python -m pwcap.tables.schema`; do not edit.",
        "Timestamps are capture timestamps, UTC, microseconds.",
        "",
        "# The dataset (`pwcap decode`)",
    ]
    lines += _tables_markdown(TABLES)
    lines += ["", "## anomaly kinds", "", "| family | kind | meaning |", "|---|---|---|"]
    for family, kinds in ANOMALY_KINDS.items():
        lines += [f"| {family} | `{kind}` | {meaning} |" for kind, meaning in kinds.items()]
    lines += _summary_markdown()
    lines += ["", "# The analytics (`pwcap analyze`, `jobs/*.py`)"]
    lines += _tables_markdown(ANALYTICS)
    lines += [
        "",
        "## finding kinds",
        "",
        "| kind | what it is, and when it is found |",
        "|---|---|",
    ]
    lines += [f"| `{kind}` | {meaning} |" for kind, meaning in FINDING_KINDS.items()]
    return "\n".join(lines) + "\n"


def _summary_markdown() -> list[str]:
    """What the summary ``pwcap decode`` prints says of the packets it skipped."""
    from ..capture.stats import SKIP_REASONS

    lines = [
        "",
        "## skipped packets (the decode summary)",
        "",
        "The summary `pwcap decode` prints counts every record: `packets N (T TCP, S other"
        " skipped [reasons])`, each reason with its count; a capture whose records give no"
        " TCP segment at all also gets a warning with the reasons. `tunnelled` counts the TCP"
        " segments per `encapsulation` (as in `connections`; bare segments are not counted).",
        "",
        "| reason printed | meaning |",
        "|---|---|",
    ]
    return lines + [f"| {why.printed} | {why.meaning} |" for why in SKIP_REASONS.values()]


def _tables_markdown(tables: dict[str, list[Column]]) -> list[str]:
    lines = []
    for table, columns in tables.items():
        lines += ["", f"## {table}", "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {c.type} | {c.doc} |" for c in columns]
    return lines


if __name__ == "__main__":
    print(markdown(), end="")
