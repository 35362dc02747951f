"""The Kafka 0.7 decoder on frames built from the wire spec and the 0.7 source layouts."""

from __future__ import annotations

import hashlib
import random
import struct

import pyarrow as pa
import pytest

from pwcap.capture.events import ClientBy, Direction
from pwcap.decode.api import FrameBudget
from pwcap.decode.kafka07 import decoder as decoder_module
from pwcap.decode.kafka07 import (
    find_request_start,
    find_response_start,
    looks_like_request,
    looks_like_response,
)
from pwcap.tables.schema import arrow_schema
from tests.kafka07_frames import (
    FETCH,
    GZIP,
    MULTIFETCH,
    MULTIPRODUCE,
    OFFSETS,
    PRODUCE,
    SNAPPY,
    Conversation,
    compressed,
    fetch_body,
    message,
    multifetch_response,
    offsets_body,
    offsets_response,
    produce_body,
    request,
    response,
)
from tests.pulsar_frames import command, frame


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def log_of(payloads: list[bytes], magic: int = 1) -> bytes:
    return b"".join(message(p, magic) for p in payloads)


# -- requests ------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
def test_produce_becomes_one_frame_and_a_message_row_per_message(magic):
    payloads = [b"first", b"second" * 10, b""]
    c = Conversation()
    c.client(request(PRODUCE, produce_body("orders", 3, log_of(payloads, magic))))
    sink = c.close()
    (row,) = sink.frames
    assert row["command"] == "PRODUCE" and row["command_type"] == PRODUCE
    assert (row["topic"], row["partition"], row["num_messages"]) == ("orders", 3, 3)
    assert row["checksum_ok"] is True and row["direction"] == "c2b"
    assert [m["payload_sha256"] for m in sink.messages] == [sha(p) for p in payloads]
    assert [m["payload_size"] for m in sink.messages] == [len(p) for p in payloads]
    assert {(m["topic"], m["partition"], m["magic"], m["direction"]) for m in sink.messages} == {
        ("orders", 3, magic, "c2b")
    }
    assert all(m["offset"] is None for m in sink.messages)  # the log position is the broker's
    assert sink.anomalies == []


def test_multiproduce_messages_carry_their_own_parts_topic_and_partition():
    c = Conversation()
    c.client(
        request(
            MULTIPRODUCE,
            produce_body("a", 0, log_of([b"a0", b"a1"])),
            produce_body("b", 2, log_of([b"b0"])),
        )
    )
    sink = c.close()
    (row,) = sink.frames
    assert row["command"] == "MULTIPRODUCE" and row["num_messages"] == 3
    assert row.get("topic") is None  # the parts disagree
    assert "parts=2" in row["info"]
    assert [(m["topic"], m["partition"], m["payload_sha256"]) for m in sink.messages] == [
        ("a", 0, sha(b"a0")),
        ("a", 0, sha(b"a1")),
        ("b", 2, sha(b"b0")),
    ]


def test_fetch_request_carries_offset_and_max_size():
    c = Conversation()
    c.client(request(FETCH, fetch_body("t", 1, 123456789012, 300)))
    (row,) = c.close().frames
    assert (row["command"], row["topic"], row["partition"]) == ("FETCH", "t", 1)
    assert (row["offset"], row["max_size"]) == (123456789012, 300)


# -- responses -----------------------------------------------------------------------------


def test_fetch_response_messages_get_log_offsets_and_a_partial_tail_is_no_error():
    payloads = [b"x" * 10, b"y" * 20, b"z" * 30]
    log = log_of(payloads)
    cut = len(log) - 7  # the broker cuts the log at max_size, inside the last message
    c = Conversation()
    c.client(request(FETCH, fetch_body("t", 0, 5000, cut)))
    c.broker(response(0, log[:cut]))
    sink = c.close()
    req, resp = sink.frames
    assert resp["command"] == "FETCH_RESPONSE" and resp.get("command_type") is None
    assert (resp["answers"], resp["request_ts"]) == ("FETCH", req["ts"])
    assert (resp["topic"], resp["partition"], resp["offset"]) == ("t", 0, 5000)
    assert resp["error_code"] == "NoError"
    assert resp["num_messages"] == 2
    assert resp["truncated_tail"] == len(message(payloads[2])) - 7
    starts = [5000, 5000 + len(message(payloads[0]))]
    assert [m["offset"] for m in sink.messages] == starts
    assert [m["payload_sha256"] for m in sink.messages] == [sha(p) for p in payloads[:2]]
    assert {m["direction"] for m in sink.messages} == {"b2c"}
    assert sink.anomalies == []


def test_fetch_error_response_carries_the_error_name():
    c = Conversation()
    c.client(request(FETCH, fetch_body("t", 0, 99, 100)))
    c.broker(response(1))
    resp = c.close().frames[1]
    assert (resp["error_code"], resp["answers"], resp["num_messages"]) == (
        "OffsetOutOfRange",
        "FETCH",
        0,
    )


def test_multifetch_response_parts_are_matched_to_the_fetches_by_position():
    c = Conversation()
    c.client(
        request(
            MULTIFETCH,
            fetch_body("a", 0, 0, 1000),
            fetch_body("b", 1, 700, 1000),
            fetch_body("c", 0, 50, 1000),
        )
    )
    c.broker(multifetch_response((0, log_of([b"a0", b"a1"])), (1, b""), (0, log_of([b"c0"]))))
    sink = c.close()
    resp = sink.frames[1]
    assert (resp["command"], resp["answers"], resp["error_code"]) == (
        "MULTIFETCH_RESPONSE",
        "MULTIFETCH",
        "NoError",
    )
    assert "part 1 b:1 OffsetOutOfRange" in resp["info"]
    assert [(m["topic"], m["partition"], m["offset"]) for m in sink.messages] == [
        ("a", 0, 0),
        ("a", 0, len(message(b"a0"))),
        ("c", 0, 50),
    ]


def test_offsets_request_and_response():
    c = Conversation()
    c.client(request(OFFSETS, offsets_body("t", 2, -1, 5)))
    c.broker(offsets_response([4096, 0]))
    c.client(request(OFFSETS, offsets_body("t", 2, -2, 1)))
    c.broker(offsets_response([0]))
    sink = c.close()
    assert sink.commands() == ["OFFSETS", "OFFSETS_RESPONSE"] * 2
    assert "time=latest max_offsets=5" in sink.frames[0]["info"]
    assert "time=earliest" in sink.frames[2]["info"]
    assert "offsets=[4096, 0]" in sink.frames[1]["info"]
    assert sink.frames[1]["answers"] == "OFFSETS" and sink.frames[1]["partition"] == 2
    assert sink.anomalies == []


# -- compression ---------------------------------------------------------------------------

CODECS = [(GZIP, False, "GZIP"), (SNAPPY, False, "SNAPPY"), (SNAPPY, True, "SNAPPY")]


@pytest.mark.parametrize(("codec", "framed", "name"), CODECS, ids=["gzip", "snappy", "xerial"])
def test_compressed_message_expands_into_its_inner_messages(codec, framed, name):
    payloads = [b"p%d" % i * 50 for i in range(5)]
    wrapper = compressed(log_of(payloads), codec, framed)
    log = message(b"plain") + wrapper
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, log)))
    c.client(request(FETCH, fetch_body("t", 0, 100, 10_000)))
    c.broker(response(0, log))
    sink = c.close()
    produced = [m for m in sink.messages if m["direction"] == "c2b"]
    fetched = [m for m in sink.messages if m["direction"] == "b2c"]
    for rows in (produced, fetched):
        assert [m["payload_sha256"] for m in rows] == [sha(p) for p in [b"plain", *payloads]]
        assert [m["compression"] for m in rows] == ["NONE"] + [name] * 5
        assert [m["batch_index"] for m in rows] == [None, 0, 1, 2, 3, 4]
        assert all(m["checksum_ok"] for m in rows)
    # every inner message sits at its wrapper's offset: where a consumer fetches it from
    assert [m["offset"] for m in fetched] == [100] + [100 + len(message(b"plain"))] * 5
    assert sink.frames[0]["num_messages"] == 6 and sink.anomalies == []


def test_nested_compression_is_expanded_recursively():
    inner = compressed(log_of([b"deep1", b"deep2"]), SNAPPY)
    outer = compressed(message(b"mid") + inner, GZIP)
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, outer)))
    sink = c.close()
    assert [m["payload_sha256"] for m in sink.messages] == [
        sha(b"mid"),
        sha(b"deep1"),
        sha(b"deep2"),
    ]
    assert {m["compression"] for m in sink.messages} == {"GZIP"}


def test_nesting_deeper_than_any_client_writes_is_refused():
    nested = message(b"core")
    for _ in range(4):
        nested = compressed(nested, GZIP)
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, nested)))
    sink = c.close()
    assert sink.kinds() == ["decompression_failed"]
    (row,) = sink.messages
    assert row.get("payload_sha256") is None and row["compression"] == "GZIP"


def test_decompression_is_bounded():
    bomb = compressed(message(b"\0" * 200_000), GZIP)
    c = Conversation(max_decompressed_size=10_000)
    c.client(request(PRODUCE, produce_body("t", 0, bomb + message(b"after"))))
    sink = c.close()
    assert sink.kinds() == ["decompression_failed"]
    wrapper, after = sink.messages
    assert wrapper["compression"] == "GZIP" and wrapper.get("payload_sha256") is None
    assert after["payload_sha256"] == sha(b"after")


def test_the_decompression_bound_holds_for_a_whole_frame():
    wrapper = compressed(message(b"\0" * 6000), GZIP)
    c = Conversation(max_decompressed_size=10_000)
    c.client(request(MULTIPRODUCE, *(produce_body("t", p, wrapper) for p in range(3))))
    sink = c.close()
    assert [m.get("payload_size") for m in sink.messages] == [6000, None, None]
    assert sink.kinds() == ["decompression_failed"] * 2


def test_corrupt_compressed_payload_is_an_anomaly_and_the_set_goes_on():
    damaged = message(b"\x1f\x8b not gzip at all", 1, GZIP)
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, damaged + message(b"ok"))))
    sink = c.close()
    assert sink.kinds() == ["decompression_failed"]
    assert [m.get("payload_sha256") for m in sink.messages] == [None, sha(b"ok")]


# -- checksums -----------------------------------------------------------------------------


def test_bad_crc_is_flagged_on_message_frame_and_anomalies():
    log = message(b"good") + message(b"bad", bad_crc=True) + message(b"good again", magic=0)
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, log)))
    sink = c.close()
    assert [m["checksum_ok"] for m in sink.messages] == [True, False, True]
    assert sink.frames[0]["checksum_ok"] is False
    assert sink.kinds() == ["bad_checksum"]


def test_bad_wrapper_crc_marks_every_inner_message():
    wrapper = compressed(log_of([b"a", b"b"]), GZIP, bad_crc=True)
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, wrapper)))
    sink = c.close()
    assert [m["checksum_ok"] for m in sink.messages] == [False, False]
    assert [m["payload_sha256"] for m in sink.messages] == [sha(b"a"), sha(b"b")]


# -- pairing -------------------------------------------------------------------------------


def test_responses_pair_in_order_and_produces_expect_none():
    c = Conversation()
    c.client(request(FETCH, fetch_body("a", 0, 0, 100)))
    c.client(request(PRODUCE, produce_body("a", 0, log_of([b"x"]))))
    c.client(request(OFFSETS, offsets_body("a", 0, -1, 1)))
    c.client(request(FETCH, fetch_body("b", 0, 0, 100)))
    c.broker(response(0, log_of([b"from a"])))
    c.broker(offsets_response([42]))
    c.broker(response(0))
    sink = c.close()
    requests = {f["ts"]: f for f in sink.frames if f["direction"] == "c2b"}
    answers = [f for f in sink.frames if f["direction"] == "b2c"]
    assert [(f["answers"], requests[f["request_ts"]]["topic"]) for f in answers] == [
        ("FETCH", "a"),
        ("OFFSETS", "a"),
        ("FETCH", "b"),
    ]
    assert sink.anomalies == []


def test_response_without_a_request_is_unmatched_once_the_client_side_proves_no_loss():
    c = Conversation()
    c.broker(response(0, log_of([b"x"])))
    c.client(request(PRODUCE, produce_body("t", 0, log_of([b"y"]))))
    sink = c.close()
    assert sink.kinds() == ["unmatched_response"]
    assert sink.frames[0]["info"] == "unpaired"


def test_request_loss_reported_late_is_not_an_unmatched_response():
    c = Conversation()
    lost = request(FETCH, fetch_body("t", 0, 0, 100))
    c.offsets[Direction.C2B] += len(lost)  # reassembly has not noticed the hole yet
    c.broker(response(0, log_of([b"x"])))
    c.ts += 1
    c.decoder.on_gap(Direction.C2B, c.ts, 0, len(lost))
    sink = c.close()
    assert "unmatched_response" not in sink.kinds()


def test_after_a_lost_request_pairing_stops_until_a_response_fits_again():
    c = Conversation()
    c.client(request(FETCH, fetch_body("t", 0, 0, 100)))
    c.broker(response(0, log_of([b"one"])))
    c.gap(Direction.C2B, len(request(FETCH, fetch_body("t", 0, 20, 100))))
    c.broker(response(0, log_of([b"two"])))  # answers the lost FETCH
    c.client(request(OFFSETS, offsets_body("t", 0, -1, 3)))
    c.broker(offsets_response([9, 0]))
    sink = c.close()
    answers = [f for f in sink.frames if f["direction"] == "b2c"]
    assert [f.get("answers") for f in answers] == ["FETCH", None, "OFFSETS"]
    assert answers[1]["info"] == "unpaired" and answers[1]["command"] == "FETCH_RESPONSE"
    assert sink.kinds() == ["pairing_lost"]


def test_a_lost_response_tail_keeps_framing_and_pairing_recovers():
    c = Conversation()
    c.client(request(FETCH, fetch_body("t", 0, 0, 1000)))
    first = response(0, log_of([b"a" * 100, b"b" * 100]))
    c.broker(first[:50])
    c.gap(Direction.B2C, 100)
    c.broker(first[150:])
    c.client(request(FETCH, fetch_body("t", 0, 500, 1000)))
    c.broker(response(0, log_of([b"c"])))
    sink = c.close()
    assert sink.kinds() == ["truncated_frame"]  # one whole response lost: pairing holds
    last = sink.frames[-1]
    assert (last["answers"], last["offset"]) == ("FETCH", 500)
    assert sink.messages[-1]["payload_sha256"] == sha(b"c")


def test_a_request_lost_after_its_type_was_seen_keeps_its_place():
    lost_fetch = request(FETCH, fetch_body("t", 0, 100, 1000))
    lost_produce = request(PRODUCE, produce_body("t", 0, log_of([b"p"])))
    c = Conversation()
    c.client(lost_fetch[:8])
    c.gap(Direction.C2B, len(lost_fetch) - 8)
    c.client(lost_produce[:6])
    c.gap(Direction.C2B, len(lost_produce) - 6)
    c.client(request(FETCH, fetch_body("t", 0, 900, 1000)))
    c.broker(response(0, log_of([b"for the lost one"])))
    c.broker(response(0, log_of([b"for 900"])))
    sink = c.close()
    assert sink.kinds() == ["truncated_frame", "truncated_frame"]
    lost, found = [f for f in sink.frames if f["direction"] == "b2c"]
    assert lost["answers"] == "FETCH" and lost.get("topic") is None
    assert lost.get("request_ts") is None  # when it was sent is unknown: no latency
    assert (found["answers"], found["offset"]) == ("FETCH", 900)
    assert sink.messages[-1]["offset"] == 900


def test_a_lost_request_already_answered_is_not_waited_for():
    lost = request(FETCH, fetch_body("t", 0, 100, 1000))
    c = Conversation()
    c.client(lost[:8])
    c.broker(response(0, log_of([b"for the lost one"])))  # came before reassembly saw the hole
    c.gap(Direction.C2B, len(lost) - 8)
    c.client(request(FETCH, fetch_body("t", 0, 900, 1000)))
    c.broker(response(0, log_of([b"for 900"])))
    sink = c.close()
    assert sink.kinds() == ["truncated_frame"]
    assert [f.get("answers") for f in sink.frames if f["direction"] == "b2c"] == [None, "FETCH"]
    assert sink.messages[-1]["offset"] == 900


def test_garbage_in_the_request_stream_is_skipped_as_one_resync():
    rng = random.Random(3)
    garbage = bytes(rng.randrange(256) for _ in range(333))
    c = Conversation()
    c.client(request(FETCH, fetch_body("t", 0, 0, 100)))
    c.client(garbage[:4] + b"\x7f" + garbage[5:])  # first bytes: a length no frame has
    c.client(request(OFFSETS, offsets_body("t", 0, -2, 1)))
    sink = c.close()
    assert sink.commands() == ["FETCH", "OFFSETS"]
    resync = [a for a in sink.anomalies if a["kind"] == "resync"]
    assert len(resync) == 1 and resync[0]["size"] == len(garbage)


def test_capture_starting_mid_frame_hunts_both_directions():
    fetch = request(FETCH, fetch_body("t", 0, 0, 1000))
    answer = response(0, log_of([b"m1", b"m2"]))
    c = Conversation(ClientBy.PORT)
    c.broker(answer[3:])  # the end of an answer to a request sent before the capture
    c.client(fetch[9:] + fetch)
    c.broker(answer)
    sink = c.close()
    assert sink.commands() == ["FETCH", "FETCH_RESPONSE"]
    assert sink.frames[1]["answers"] == "FETCH"  # realigned: the shape and times fit
    assert [(a["direction"], a["kind"]) for a in sink.anomalies] == [
        ("c2b", "resync"),
        ("b2c", "resync"),
    ]
    # the skipped bytes are the first ones of each direction: offset 0, never -1
    assert [(a["stream_offset"], a["size"]) for a in sink.anomalies] == [
        (0, len(fetch) - 9),
        (0, len(answer) - 3),
    ]


def test_a_response_whose_request_may_be_lost_is_left_unpaired():
    fetch = request(FETCH, fetch_body("t", 0, 0, 1000))
    answer = response(0, log_of([b"m1"]))
    c = Conversation(ClientBy.PORT)
    c.client(fetch)
    c.broker(answer[3:] + answer)  # skipped bytes after the FETCH: they may have answered it
    sink = c.close()
    assert sink.frames[1]["info"] == "unpaired"


def test_frames_split_over_many_records_decode_the_same():
    def run(pieces: int):
        c = Conversation()
        c.client(request(PRODUCE, produce_body("t", 0, log_of([b"q" * 3000] * 3))), pieces)
        c.client(request(FETCH, fetch_body("t", 0, 0, 10_000)), pieces)
        c.broker(response(0, log_of([b"q" * 3000] * 2)), pieces)
        sink = c.close()
        drop = {"ts", "ts_first", "request_ts"}
        return (
            [{k: v for k, v in f.items() if k not in drop} for f in sink.frames],
            [m["payload_sha256"] for m in sink.messages],
            sink.anomalies,
        )

    assert run(1) == run(97)


def test_oversize_frames_are_stepped_over_and_pairing_holds():
    c = Conversation(max_frame_size=1000)
    c.client(request(FETCH, fetch_body("t", 0, 0, 5000)))
    c.client(request(PRODUCE, produce_body("t", 0, log_of([b"v" * 2000]))), pieces=3)
    c.client(request(FETCH, fetch_body("t", 0, 7000, 100)))
    c.broker(response(0, log_of([b"w" * 3000])), pieces=4)
    c.broker(response(0, log_of([b"x"])))
    sink = c.close()
    assert sink.kinds() == ["oversize_frame", "oversize_frame"]
    assert sink.commands() == ["FETCH", "FETCH", "FETCH_RESPONSE"]
    assert (sink.frames[-1]["answers"], sink.frames[-1]["offset"]) == ("FETCH", 7000)


def test_unknown_request_type_is_reported():
    body = struct.pack(">h", 7) + fetch_body("t", 0, 0, 1)
    c = Conversation()
    c.client(struct.pack(">i", len(body)) + body)
    c.client(request(FETCH, fetch_body("t", 0, 0, 1)))
    sink = c.close()
    assert sink.kinds()[0] == "unknown_command"
    assert sink.commands() == ["FETCH"]


# -- sniffing ------------------------------------------------------------------------------

REQUESTS = {
    "produce": request(PRODUCE, produce_body("topic-1", 0, log_of([b"x" * 10]))),
    "fetch": request(FETCH, fetch_body("topic-1", 0, 0, 1024)),
    "multifetch": request(MULTIFETCH, fetch_body("a", 0, 0, 9), fetch_body("b", 1, 0, 9)),
    "multiproduce": request(MULTIPRODUCE, produce_body("a", 0, log_of([b"y"]))),
    "offsets": request(OFFSETS, offsets_body("topic-1", 0, -2, 1)),
}


@pytest.mark.parametrize("name", REQUESTS)
def test_sniff_accepts_each_request_type(name):
    assert looks_like_request(REQUESTS[name])
    assert not looks_like_response(REQUESTS[name])
    assert find_request_start(b"\x07" * 50 + REQUESTS[name], 0, 5 << 20) == (50, True, 0)


def test_sniff_accepts_the_first_segment_of_a_large_produce():
    big = request(PRODUCE, produce_body("t", 0, log_of([b"z" * 100_000])))
    assert looks_like_request(big[:1448])


def test_sniff_rejects_inconsistent_requests_pulsar_and_noise():
    fetch = REQUESTS["fetch"]
    assert not looks_like_request(fetch[:4] + b"\x00\x09" + fetch[6:])  # type 9
    assert not looks_like_request(struct.pack(">i", len(fetch) - 3) + fetch[4:])  # length
    assert not looks_like_request(fetch[:10])  # too little to judge
    bad_crc = request(PRODUCE, produce_body("t", 0, message(b"x", bad_crc=True)))
    assert not looks_like_request(bad_crc)
    pulsar = [
        frame(command("CONNECT", client_version="2.10", protocol_version=19)),
        frame(command("PING")),
        frame(command("FLOW", consumer_id=1, messagePermits=1000)),
    ]
    for data in pulsar:
        assert not looks_like_request(data) and not looks_like_response(data)
    assert not looks_like_request(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    rng = random.Random(11)
    noise = [bytes(rng.randrange(256) for _ in range(rng.randrange(6, 200))) for _ in range(3000)]
    assert sum(looks_like_request(d) for d in noise) == 0


def test_no_frame_boundary_is_confirmed_in_noise():
    """Uniform noise, and sparse noise full of zero bytes like binary protocols send."""
    rng = random.Random(17)
    for _ in range(40):
        uniform = rng.randbytes(16384)
        sparse = bytes(b if rng.random() < 0.3 else 0 for b in rng.randbytes(16384))
        for data in (uniform, sparse):
            assert not find_request_start(data, 0, 5 << 20).confirmed
            assert not find_response_start(data, 0, 5 << 20).confirmed


def test_sniff_accepts_responses():
    assert looks_like_response(response(0, log_of([b"a", b"b"])))
    assert looks_like_response(offsets_response([4096, 0]))  # newest first, as 0.7 answers
    assert not looks_like_response(offsets_response([0, 4096]))
    assert looks_like_response(multifetch_response((0, log_of([b"a"])), (3, b"")))
    assert not looks_like_response(response(9))
    assert not looks_like_response(response(1, log_of([b"a"])))  # 0.7 errors have no body


# -- robustness ----------------------------------------------------------------------------


def conversation_bytes() -> tuple[bytes, bytes]:
    """A client stream and the broker's answers, every request type and codec."""
    log = log_of([b"a" * 30, b"b" * 40]) + compressed(log_of([b"c", b"d"]), GZIP)
    log += compressed(log_of([b"e"]), SNAPPY, framed=True) + compressed(log_of([b"f"]), SNAPPY)
    client = b"".join(
        [
            request(PRODUCE, produce_body("t", 0, log)),
            request(MULTIPRODUCE, produce_body("t", 0, log), produce_body("u", 1, log)),
            request(FETCH, fetch_body("t", 0, 0, len(log) - 5)),
            request(MULTIFETCH, fetch_body("t", 0, 0, 5000), fetch_body("u", 1, 0, 9)),
            request(OFFSETS, offsets_body("t", 0, -1, 2)),
        ]
    )
    broker = b"".join(
        [
            response(0, log[:-5]),
            multifetch_response((0, log), (0, log[:9])),
            offsets_response([len(log), 0]),
        ]
    )
    return client, broker


def feed_randomly(client: bytes, broker: bytes, rng: random.Random, client_by: ClientBy):
    c = Conversation(client_by, max_frame_size=100_000)
    streams = [client, broker]
    positions = [0, 0]
    while positions[0] < len(client) or positions[1] < len(broker):
        side = rng.randrange(2)
        data = streams[side]
        if positions[side] >= len(data):
            continue
        size = rng.choice((1, 2, 7, 60, 500, 3000))
        chunk = data[positions[side] : positions[side] + size]
        if rng.random() < 0.05:
            c.gap(Direction(side), len(chunk))
        else:
            c.send(Direction(side), chunk)
        positions[side] += len(chunk)
    return c.close()


def test_the_whole_conversation_decodes_without_anomalies():
    client, broker = conversation_bytes()
    c = Conversation()
    c.client(client, 13)
    c.broker(broker, 7)
    sink = c.close()
    assert sink.anomalies == []
    assert sink.commands().count("FETCH_RESPONSE") == 1
    assert sum(f.get("num_messages") or 0 for f in sink.frames) == len(sink.messages)


def test_fuzz_damaged_cut_and_lost_streams_never_raise_and_rows_fit_the_schema():
    client, broker = conversation_bytes()
    rng = random.Random(2026)
    frames: list[dict] = []
    messages: list[dict] = []
    anomalies: list[dict] = []
    for _ in range(300):
        streams = []
        for data in (client, broker):
            damaged = bytearray(data)
            for _ in range(rng.randrange(0, 6)):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            start = rng.randrange(len(damaged)) if rng.random() < 0.3 else 0
            streams.append(bytes(damaged[start:]))
        client_by = rng.choice(list(ClientBy))
        sink = feed_randomly(streams[0], streams[1], rng, client_by)
        frames += sink.frames
        messages += sink.messages
        anomalies += sink.anomalies
    for table, rows in (("frames", frames), ("messages", messages), ("anomalies", anomalies)):
        pa.Table.from_pylist(rows, schema=arrow_schema(table))  # raises on a stray column
    assert frames and messages and anomalies


def test_fuzz_random_bytes_never_raise():
    rng = random.Random(5)
    for _ in range(200):
        client = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 400)))
        broker = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 400)))
        feed_randomly(client, broker, rng, rng.choice(list(ClientBy)))


def test_a_gap_while_hunting_counts_the_held_bytes_from_their_own_offset():
    fetch = request(FETCH, fetch_body("t", 0, 0, 1000))
    c = Conversation(ClientBy.PORT)
    c.client(fetch[:19])  # joined mid-stream: a frame's start, held until it proves one
    c.gap(Direction.C2B, len(fetch) - 19)
    c.client(fetch)
    sink = c.close()
    resyncs = [a for a in sink.anomalies if a["kind"] == "resync"]
    assert resyncs and all(a["stream_offset"] >= 0 for a in resyncs)


def test_roles_guessed_wrong_are_swapped_by_the_first_telling_record():
    c = Conversation(ClientBy.GUESS)
    conn = c.conn
    c.client(response(0, log_of([b"late"])))  # the first segment seen was the broker's
    c.offsets.reverse()  # reassembly labels later bytes by the swapped roles
    c.client(request(FETCH, fetch_body("t", 0, 0, 100)))
    c.broker(response(0, log_of([b"answer"])))
    sink = c.close()
    assert (conn.client_port, conn.server_port) == (9092, 40000)
    assert sink.commands() == ["FETCH_RESPONSE", "FETCH", "FETCH_RESPONSE"]
    assert [f["direction"] for f in sink.frames] == ["b2c", "c2b", "b2c"]
    assert sink.messages[-1]["payload_sha256"] == sha(b"answer")


def test_a_frame_that_breaks_the_decoder_is_an_anomaly_and_decoding_goes_on(monkeypatch):
    def broken(*args):
        raise ValueError("unforeseen")

    monkeypatch.setattr(decoder_module, "read_message_set", broken)
    c = Conversation()
    c.client(request(PRODUCE, produce_body("t", 0, log_of([b"x"]))))
    c.client(request(FETCH, fetch_body("t", 0, 0, 10)))
    sink = c.close()
    assert sink.kinds() == ["decode_error"]
    assert sink.commands() == ["FETCH"]


def test_a_request_cut_by_the_end_of_the_capture_explains_its_response():
    fetch = request(FETCH, fetch_body("t", 0, 0, 100))
    c = Conversation()
    c.client(fetch[:10])  # the rest of the request was never captured
    c.broker(response(0, log_of([b"x"])))
    sink = c.close()
    assert sink.kinds() == ["truncated_frame"]


def test_incomplete_frames_of_all_connections_hold_no_more_than_their_budget():
    """As for Pulsar: past the shared budget, the streams holding most give their frame up
    (a truncated_frame that says why), skip its rest and stay in step with what follows."""
    budget = FrameBudget(limit=600_000)
    produce = request(PRODUCE, produce_body("t", 0, log_of([b"x" * 200_000])))
    fetch = request(FETCH, fetch_body("t", 0, 0, 10))
    talks = [Conversation(frames=budget) for _ in range(5)]
    for talk in talks:
        talk.client(produce[:150_000])  # the fifth is one too many
        assert budget.total <= 600_000
    for talk in talks:
        talk.client(produce[150_000:] + fetch)
        talk.close()
    assert budget.total == 0
    outcomes = [(talk.sink.commands(), talk.sink.kinds()) for talk in talks]
    assert outcomes == [(["FETCH"], ["truncated_frame"])] * 2 + [(["PRODUCE", "FETCH"], [])] * 3
    assert "given up after 150000 bytes" in talks[0].sink.anomalies[0]["detail"]


def test_a_frame_is_never_whole_before_its_first_byte_when_the_clock_runs_backwards():
    """As for Pulsar: records timed backwards timed a frame's end before its start."""
    fetch = request(FETCH, fetch_body("t", 0, 0, 10))
    c = Conversation()
    c.decoder.on_data(Direction.C2B, 50, 0, fetch[:3])
    c.decoder.on_data(Direction.C2B, 20, 3, fetch[3:])
    assert [(r["ts_first"], r["ts"]) for r in c.sink.frames] == [(50, 50)]
