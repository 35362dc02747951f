"""Framing: frames split anywhere, oversize / truncated / unknown / garbage, gaps, sniffing."""

from __future__ import annotations

import random
import struct
import time

import pytest

from pwcap.capture.events import ClientBy, Direction
from pwcap.decode.api import FrameBudget
from pwcap.decode.pulsar import contains_frame, sniff
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.decode.pulsar.framing import find_frame_start
from pwcap.decode.pulsar.sniff import looks_like_command
from tests.pulsar_frames import command, decoder, entry_bytes, frame


def flows(n: int) -> list[bytes]:
    return [frame(command("FLOW", consumer_id=1, messagePermits=i + 1)) for i in range(n)]


def big_send() -> bytes:
    md = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    return frame(command("SEND", producer_id=1, sequence_id=0), entry_bytes(md, b"B" * 200_000))


def without_times(rows):
    return [{k: v for k, v in r.items() if k not in ("ts", "ts_first")} for r in rows]


def test_tiny_pieces_decode_like_one_call():
    stream = b"".join([*flows(3), big_send(), *flows(2)])
    whole_dec, whole, _ = decoder()
    whole_dec.on_data(Direction.C2B, 1, 0, stream)
    pieces_dec, pieces, _ = decoder()
    for i, pos in enumerate(range(0, len(stream), 7)):
        pieces_dec.on_data(Direction.C2B, 100 + i, pos, stream[pos : pos + 7])
    assert without_times(pieces.frames) == without_times(whole.frames)
    assert without_times(pieces.messages) == without_times(whole.messages)
    assert pieces.anomalies == whole.anomalies == []
    assert len(pieces.frames) == 6


def test_frame_times_are_first_and_last_byte():
    first, second = flows(2)
    stream = first + second
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 10, 0, stream[:3])
    dec.on_data(Direction.C2B, 20, 3, stream[3 : len(first) + 2])
    dec.on_data(Direction.C2B, 30, len(first) + 2, stream[len(first) + 2 :])
    assert [(r["ts_first"], r["ts"]) for r in sink.frames] == [(10, 20), (20, 30)]
    assert [r["stream_offset"] for r in sink.frames] == [0, len(first)]


def test_large_frame_over_many_segments():
    wire = big_send()
    dec, sink, _ = decoder()
    for pos in range(0, len(wire), 1460):
        dec.on_data(Direction.C2B, pos, pos, wire[pos : pos + 1460])
    [row] = sink.frames
    assert row["frame_size"] == len(wire)
    assert sink.messages[0]["payload_size"] == 200_000


@pytest.mark.parametrize("record", [1, 7, 1460, 1_000_000])
def test_a_sound_oversize_frame_is_skipped_whole(record):
    big = big_send()
    stream = flows(1)[0] + big + b"".join(flows(2))
    dec, sink, _ = decoder(max_frame_size=100_000)
    for pos in range(0, len(stream), record):
        dec.on_data(Direction.C2B, pos, pos, stream[pos : pos + record])
    dec.on_close(len(stream))
    [anomaly] = sink.anomalies
    assert (anomaly["kind"], anomaly["stream_offset"]) == ("oversize_frame", len(flows(1)[0]))
    assert anomaly["size"] == len(big)
    assert [r["permits"] for r in sink.frames] == [1, 1, 2]


def test_oversize_header_over_garbage_then_resync_on_the_next_frame():
    garbage = struct.pack(">II", 200_000, 20) + b"\xff" * 20
    dec, sink, _ = decoder(max_frame_size=100_000)
    dec.on_data(Direction.C2B, 1, 0, garbage + b"".join(flows(2)))
    assert sink.kinds() == ["oversize_frame", "resync"]
    assert sink.anomalies[1]["size"] == len(garbage)
    assert [r["permits"] for r in sink.frames] == [1, 2]


def test_incomplete_frame_at_close_is_truncated():
    whole = flows(2)
    stream = whole[0] + whole[1][:-3]
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, stream)
    dec.on_close(2)
    assert len(sink.frames) == 1
    [anomaly] = sink.anomalies
    assert anomaly["kind"] == "truncated_frame"
    assert anomaly["stream_offset"] == len(whole[0])


def test_unknown_command_type_keeps_its_number():
    body = bytes([0x08, 99, 0xBA, 0x06, 0x00])  # type 99, field 103 empty
    unknown = struct.pack(">II", 4 + len(body), len(body)) + body
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, unknown + flows(1)[0])
    assert [(r["command"], r["command_type"]) for r in sink.frames] == [(None, 99), ("FLOW", 11)]
    assert sink.kinds() == ["unknown_command"]


def test_a_command_without_its_message_is_a_row_and_an_anomaly():
    body = bytes([0x08, pb.BaseCommand.SEND])  # type SEND, no `send` field
    bare = struct.pack(">II", 4 + len(body), len(body)) + body
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, bare + flows(1)[0])
    assert [r["command"] for r in sink.frames] == ["SEND", "FLOW"]
    assert sink.frames[0].get("producer_id") is None
    assert sink.kinds() == ["bad_protobuf"]


def test_undecodable_command_then_the_next_frame():
    body = b"\x08\x0b\x5a\xff\xff\xff"  # length of field 11 runs past the end
    broken = struct.pack(">II", 4 + len(body), len(body)) + body
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, broken + flows(1)[0])
    assert sink.kinds() == ["bad_protobuf"]
    assert [r["command"] for r in sink.frames] == ["FLOW"]


def test_garbage_between_frames_is_skipped_and_counted():
    first, second, third = flows(3)
    garbage = b"\x00\x00\x00\x01" * 25  # totalSize 1: no room for a command
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, first + garbage + second + third)
    assert [r["permits"] for r in sink.frames] == [1, 2, 3]
    kinds = sink.kinds()
    assert kinds[0] == "bad_frame_header"
    resync = [a for a in sink.anomalies if a["kind"] == "resync"]
    assert [(a["stream_offset"], a["size"]) for a in resync] == [(len(first), len(garbage))]


def test_gap_inside_a_frame_drops_only_that_frame():
    first, second, third = flows(3)
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, first + second[:5])
    dec.on_gap(Direction.C2B, 2, len(first) + 5, 4)
    rest = len(first) + 9
    dec.on_data(Direction.C2B, 3, rest, second[9:] + third)
    assert [r["permits"] for r in sink.frames] == [1, 3]
    assert sink.kinds() == ["truncated_frame"]
    assert sink.anomalies[0]["stream_offset"] == len(first)


def test_gap_at_a_boundary_resyncs_on_the_next_frame():
    first, second, third = flows(3)
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 1, 0, first)
    dec.on_gap(Direction.C2B, 2, len(first), 100)
    dec.on_data(Direction.C2B, 3, len(first) + 100, second[6:] + third)
    assert [r["permits"] for r in sink.frames] == [1, 3]
    resync = [a for a in sink.anomalies if a["kind"] == "resync"]
    assert [a["size"] for a in resync] == [len(second) - 6]


def test_capture_starting_mid_frame():
    first, second = flows(2)
    dec, sink, _ = decoder(ClientBy.PORT)
    dec.on_data(Direction.C2B, 1, 0, first[4:] + second)
    assert [r["permits"] for r in sink.frames] == [2]
    assert [(a["kind"], a["size"]) for a in sink.anomalies] == [("resync", len(first) - 4)]


def test_capture_starting_on_a_boundary_has_no_anomaly():
    dec, sink, _ = decoder(ClientBy.PORT)
    dec.on_data(Direction.C2B, 1, 0, b"".join(flows(2)))
    assert len(sink.frames) == 2
    assert sink.anomalies == []


def test_sniff():
    assert sniff(frame(command("CONNECT", client_version="x", protocol_version=21)))
    assert sniff(flows(1)[0])
    assert not sniff(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert not sniff(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40))
    assert not sniff(b"\x00\x00\x00\x05\x00\x00\x00\x01\x08")
    assert not sniff(b"")


def test_contains_frame_finds_pulsar_after_a_partial_frame():
    first, second = flows(2)
    assert not sniff(first[5:] + second)
    assert contains_frame(first[5:] + second)
    assert not contains_frame(b"GET / HTTP/1.1\r\n" * 20)


def test_sniff_rejects_kafka_07():
    topic = b"events"
    message = b"\x00\x00\x00\x0a\x00\x00\x00\x00\x00\x00hello!"  # set of one message
    produce = (
        struct.pack(">HH", 0, len(topic))  # PRODUCE, topic
        + topic
        + struct.pack(">iI", 0, len(message))  # partition, message set size
        + message
    )
    assert not sniff(struct.pack(">I", len(produce)) + produce)
    fetch = struct.pack(">HH", 1, len(topic)) + topic + struct.pack(">iqi", 0, 0, 1 << 20)
    assert not sniff(struct.pack(">I", len(fetch)) + fetch)


def test_find_frame_start_confirms_by_decoding():
    target = flows(1)[0]
    # A fake header whose "command" does not decode comes first.
    decoy = b"\x00\x00\x00\x09\x00\x00\x00\x05\x08\xff\xff\xff\xff"
    buf = b"junk" + decoy + target
    found = find_frame_start(buf, 0, 5 << 20, looks_like_command)
    assert found.confirmed
    assert found.pos == 4 + len(decoy)


def test_a_fake_header_declaring_five_megabytes_is_gathered_once_then_resynced():
    """A header announcing a 5 MB command over 20 MB of noise, one segment at a time: the
    frame's bytes are gathered once, not copied again per segment (over 400 s when they
    were), and the frames after the noise are found again."""
    noise = random.Random(7).randbytes(1 << 20) * 20
    head = command("SEND", producer_id=1, sequence_id=0, num_messages=1).SerializeToString()
    stream = struct.pack(">II", 5_000_004, 5_000_000) + head + noise + b"".join(flows(2))
    dec, sink, _ = decoder()
    started = time.process_time()
    for pos in range(0, len(stream), 1448):
        dec.on_data(Direction.C2B, pos, pos, stream[pos : pos + 1448])
    dec.on_close(len(stream))
    assert time.process_time() - started < 10  # quadratic copying takes minutes here
    assert sink.kinds()[0] == "bad_protobuf" and sink.kinds()[-1] == "resync"
    assert [r["permits"] for r in sink.frames] == [1, 2]


def test_incomplete_frames_of_all_connections_hold_no_more_than_their_budget():
    """Thousands of connections may each be in the middle of a frame of up to 5 MiB:
    60 of them held 470 MB. Past the budget the streams holding most give their frame up
    (a truncated_frame that says why) and skip the rest of it, so what follows decodes."""
    budget = FrameBudget(limit=600_000)
    send, flow = big_send(), flows(1)[0]
    streams = [decoder(frames=budget) for _ in range(5)]
    for index, (dec, _, _) in enumerate(streams):
        dec.on_data(Direction.C2B, index, 0, send[:150_000])  # the fifth is one too many
        assert budget.total <= 600_000
    for dec, _, _ in streams:
        dec.on_data(Direction.C2B, 10, 150_000, send[150_000:] + flow)
        dec.on_close(20)
    assert budget.total == 0
    outcomes = [([r["command"] for r in sink.frames], sink.kinds()) for _, sink, _ in streams]
    assert outcomes == [(["FLOW"], ["truncated_frame"])] * 2 + [(["SEND", "FLOW"], [])] * 3
    lost = streams[0][1].anomalies[0]
    assert (lost["stream_offset"], lost["size"]) == (0, len(send))
    assert "given up after 150000 bytes" in lost["detail"]


def test_overlapping_fake_headers_with_long_commands_are_hunted_through_in_linear_time():
    """After damage, a header every 16 bytes each declaring a 1 MB command whose bytes
    parse to the end (one unknown field spans them): each was checked in full, 18 s for
    6 MB. Only commands up to 64 KiB are checked; longer ones are hunted past."""
    size = 1_000_000
    rest = size - 7  # the length of field 100 after `type`, as a varint of 3 bytes
    varint = bytes([rest & 0x7F | 0x80, rest >> 7 & 0x7F | 0x80, rest >> 14])
    # header, type = 2 (08 02), field 100 of wire type 2 (a2 06), its length, one byte more
    unit = struct.pack(">II", size + 104, size) + b"\x08\x02\xa2\x06" + varint + b"\x01"
    stream = b"\xff" * 16 + unit * (6_000_000 // len(unit)) + b"".join(flows(2))
    dec, sink, _ = decoder()
    started = time.process_time()
    for pos in range(0, len(stream), 1448):
        dec.on_data(Direction.C2B, pos, pos, stream[pos : pos + 1448])
    dec.on_close(len(stream))
    assert time.process_time() - started < 5
    assert sink.kinds() == ["oversize_frame", "resync"]
    assert [r["permits"] for r in sink.frames] == [1, 2]


def test_a_frame_whose_command_is_too_long_to_check_is_hunted_past_after_damage():
    """Its command is not checked, so the hunt resynchronises on the frame after it."""
    long_command = command("CONNECT", client_version="v" * 70_000, protocol_version=21)
    big = frame(long_command)
    stream = b"junk" + big + b"".join(flows(1))
    dec, sink, _ = decoder(client_by=ClientBy.PORT)  # joined mid-stream: hunts from the start
    dec.on_data(Direction.C2B, 1, 0, stream)
    dec.on_close(2)
    assert [r["command"] for r in sink.frames] == ["FLOW"]
    [resync] = [a for a in sink.anomalies if a["kind"] == "resync"]
    assert (resync["stream_offset"], resync["size"]) == (0, 4 + len(big))


def test_a_frame_is_never_whole_before_its_first_byte_when_the_clock_runs_backwards():
    """Records timed backwards (a clock stepped back, a reordered capture) timed a frame's
    end before its start: ts_first > ts."""
    first, second = flows(2)
    dec, sink, _ = decoder()
    dec.on_data(Direction.C2B, 50, 0, first[:3])
    dec.on_data(Direction.C2B, 20, 3, first[3:] + second[:3])
    dec.on_data(Direction.C2B, 10, len(first) + 3, second[3:])
    assert [(r["ts_first"], r["ts"]) for r in sink.frames] == [(50, 50), (20, 20)]
