"""Hostile and damaged capture files: the reader keeps what is sound and says what is not.

Each case is a file an attacker or a broken copy could hand pwcap. None may raise anything
but a one-line :class:`CaptureError`, and none may lose a record that is sound.
"""

from __future__ import annotations

import gzip
import struct
import time

import pyarrow.parquet as pq
import pytest

from fuzz.stream_sink import RecordingSink
from pwcap.capture import CaptureError, CaptureStats, read_streams
from pwcap.cli import main
from tests.test_capture_formats import (
    EPB,
    IDB,
    MICRO,
    PB,
    Pcapng,
    ethernet,
    framed,
    original,
    pcap,
    read,
    streams,
    without_timestamps,
)

LAST_MICROSECOND_OF_9999 = 253_402_300_799_999_999  # what a dataset and a calendar hold

# -- TCP oddities ---------------------------------------------------------------------------


def tcp_frame(src: tuple[bytes, int], dst: tuple[bytes, int], flags: int, seq: int = 1) -> bytes:
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 40, 0, 0, 64, 6, 0, src[0], dst[0])
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq, 0, 0x50, flags, 65535, 0, 0)
    return ethernet(ip + tcp)


def test_a_land_packet_from_an_endpoint_to_itself_is_skipped_not_a_crash() -> None:
    """Source and destination the same address and port: no TCP stack answers it."""
    here = (bytes([10, 0, 0, 1]), 6650)
    land = tcp_frame(here, here, 0x02)
    data = pcap([(1_700_000_000_000_000, land), *framed(ethernet)], 1)
    sink, stats = read(data)
    assert streams(sink) == original()
    assert stats.malformed == 1


# -- pcapng timestamps and blocks --------------------------------------------------------------


def pcapng_with(damage: str) -> tuple[bytes, int]:
    """The sample as pcapng with one damaged packet (or interface) in the middle; returns
    the file and how many records the damage concerns."""
    writer = Pcapng()
    writer.section("<")
    writer.interface(1)
    frames = framed(ethernet)
    for ts, frame in frames[:20]:
        writer.enhanced(0, ts, frame)
    if damage == "high_word":  # a bit flip in the high word of the timestamp
        ts, frame = frames[20]
        writer.enhanced(0, ts | 1 << 62, frame)
    elif damage in ("tsresol", "tsoffset_high", "tsoffset_low"):
        if damage == "tsresol":
            writer.interface(1, tsresol=0)  # seconds, so any 64-bit count of them overflows
        else:
            writer.interface(1, tsoffset=(1 << 62) if damage == "tsoffset_high" else -(1 << 40))
        writer.interfaces[-1] = (MICRO, 0)  # the writer stamps plain microseconds
        writer.enhanced(1, 1 << 40, frames[20][1])
    for ts, frame in frames[21:]:
        writer.enhanced(0, ts, frame)
    return writer.bytes(), 1


@pytest.mark.parametrize("damage", ["high_word", "tsresol", "tsoffset_high", "tsoffset_low"])
def test_a_timestamp_no_dataset_can_hold_is_counted_and_replaced(damage: str) -> None:
    data, count = pcapng_with(damage)
    sink, stats = read(data)
    assert stats.bad_timestamps == count
    assert without_timestamps(streams(sink)) == without_timestamps(original())
    stamps = [ts for r in sink.connections.values() for s in r.streams for _, _, ts in s.timestamps]
    assert all(0 <= ts <= LAST_MICROSECOND_OF_9999 for ts in stamps)


def short_block(kind: int) -> bytes:
    return struct.pack("<II", kind, 12) + struct.pack("<I", 12)


@pytest.mark.parametrize("kind", [EPB, PB, IDB], ids=["enhanced", "obsolete", "interface"])
def test_a_short_pcapng_block_as_the_last_block_is_skipped(kind: int) -> None:
    writer = Pcapng()
    writer.section("<")
    writer.interface(1)
    for ts, frame in framed(ethernet):
        writer.enhanced(0, ts, frame)
    sink, stats = read(writer.bytes() + short_block(kind))
    assert streams(sink) == original()
    assert stats.bad_blocks == 1


def test_an_interface_option_running_past_its_block_is_ignored() -> None:
    writer = Pcapng()
    writer.section("<")
    body = struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 14, 64) + b"\x00" * 4
    writer.block(IDB, body)
    writer.interfaces.append((MICRO, 0))
    for ts, frame in framed(ethernet):
        writer.enhanced(0, ts, frame)
    sink, _ = read(writer.bytes())
    assert streams(sink) == original()


def test_a_packet_whose_captured_length_overruns_its_block_is_skipped() -> None:
    writer = Pcapng()
    writer.section("<")
    writer.interface(1)
    frames = framed(ethernet)
    for ts, frame in frames:
        writer.enhanced(0, ts, frame)
    damaged = bytearray(writer.bytes())
    last = len(damaged) - len(writer.parts[-1])
    struct.pack_into("<I", damaged, last + 20, 60_000)  # caplen of the last packet
    _sink, stats = read(bytes(damaged))
    assert stats.bad_blocks == 1
    assert stats.records == len(frames) - 1


def test_a_mid_file_packet_of_an_undeclared_interface_drops_only_that_block() -> None:
    writer = Pcapng()
    writer.section("<")
    writer.interface(1)
    frames = framed(ethernet)
    for index, (ts, frame) in enumerate(frames):
        writer.enhanced(0, ts, frame)
        if index == 40:
            writer.interfaces.append((MICRO, 0))  # known to the writer only
            writer.enhanced(1, ts, frame)  # a copy, on an interface nobody declared
    sink, stats = read(writer.bytes())
    assert streams(sink) == original()
    assert stats.bad_blocks == 1


# -- link types -------------------------------------------------------------------------------


def test_records_of_an_unknown_link_type_are_counted_by_type() -> None:
    data = pcap(framed(ethernet), 147)  # DLT_USER0
    _, stats = read(data)
    assert stats.unsupported_link == len(framed(ethernet))
    assert stats.unsupported_links == {147: len(framed(ethernet))}


@pytest.mark.parametrize("command", ["decode", "show"])
def test_a_capture_of_an_unknown_link_type_is_a_warning_and_an_anomaly(
    command: str, tmp_path, capsys
) -> None:
    """It decodes to nothing: exit 0 with no word about it once passed for a quiet capture."""
    capture = tmp_path / "user0.pcap"
    capture.write_bytes(pcap(framed(ethernet), 147))  # DLT_USER0
    records = len(framed(ethernet))
    out = ["-o", str(tmp_path / "ds"), "-q"] if command == "decode" else []
    assert main([command, str(capture), *out]) == 0
    said = capsys.readouterr()
    assert said.err == (
        f"pwcap {command}: warning: {capture}: {records:,} records of link type 147 skipped"
        " (a link layer pwcap does not parse)\n"
    )
    if command == "decode":
        [row] = pq.read_table(tmp_path / "ds" / "anomalies").to_pylist()
    else:
        [line] = said.out.splitlines()
        row = {
            "kind": line.split("[")[1].split("]")[0],
            "size": int(line.split("] ")[1].split()[0]),
        }
    assert (row["kind"], row["size"]) == ("unsupported_link_type", records)


# -- gzip -------------------------------------------------------------------------------------


def test_gzip_of_zero_padding_after_the_records_ends_the_capture_in_bounded_time() -> None:
    inner = pcap(framed(ethernet), 1)
    packed = gzip.compress(inner + bytes(64 << 20), compresslevel=1)
    started = time.process_time()
    sink, stats = read(packed)
    assert time.process_time() - started < 5  # was minutes per GiB: 16-byte zero records
    assert streams(sink) == original()
    assert stats.padding_bytes == 64 << 20


def test_zeros_followed_by_other_bytes_stop_the_capture_with_a_cut_off_error() -> None:
    inner = pcap(framed(ethernet), 1) + bytes(4096) + b"\x07" * 100
    sink = RecordingSink()
    with pytest.raises(CaptureError, match="zero bytes") as caught:
        read_streams(inner, sink)
    assert caught.value.truncated
    assert streams(sink) == original()


def test_a_gzip_capture_with_a_bad_crc_keeps_every_record_and_says_so() -> None:
    packed = bytearray(gzip.compress(pcap(framed(ethernet), 1)))
    packed[-8] ^= 0xFF  # the CRC32 of the trailer
    sink = RecordingSink()
    stats = CaptureStats()
    with pytest.raises(CaptureError, match="CRC") as caught:
        read_streams(bytes(packed), sink, stats=stats)
    assert caught.value.truncated  # a warning and exit 3, not "not a capture"
    assert streams(sink) == original()


# -- time running backwards -----------------------------------------------------------------


def test_a_connection_never_ends_before_it_starts_when_the_clock_runs_backwards() -> None:
    frames = framed(ethernet)
    jumpy = [(ts - (10**9 if i % 7 == 3 else 0), frame) for i, (ts, frame) in enumerate(frames)]
    sink, _ = read(pcap(jumpy, 1))
    for recorded in sink.connections.values():
        conn = recorded.conn
        stamps = [ts for stream in recorded.streams for _, _, ts in stream.timestamps]
        assert conn.first_ts <= min(stamps) <= max(stamps) <= conn.last_ts
