"""Protocol detection: registered ports and user hints first, then the first bytes."""

from __future__ import annotations

import time

import pytest

from pwcap.capture.events import ClientBy, Connection, Direction
from pwcap.decode.registry import EVENT_BYTES, PROTOCOLS, SNIFF_LIMIT, Registry, Sniffer
from tests import kafka07_frames as kafka
from tests.pulsar_frames import command, frame

CONNECT = frame(command("CONNECT", client_version="Pulsar-Java-v3.1", protocol_version=21))
PING = frame(command("PING"))
KAFKA_FETCH = kafka.request(kafka.FETCH, kafka.fetch_body("events", 0, 0, 300_000))
KAFKA_OFFSETS_ANSWER = kafka.offsets_response([70, 0])
# The first bytes of a TLS 1.2 ClientHello record (handshake, version 3.1, length 512).
CLIENT_HELLO = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03])


def conn(server_port: int, client_by: ClientBy = ClientBy.SYN, client_port: int = 40000):
    return Connection(7, "10.0.0.1", client_port, "10.0.0.2", server_port, 0, client_by)


def detect(sniffer: Sniffer, *chunks: tuple[Direction, bytes]):
    decision, offsets = None, [0, 0]
    for direction, data in chunks:
        decision = sniffer.on_data(direction, 1, offsets[direction], data)
        offsets[direction] += len(data)
        if decision is not None:
            break
    return decision


@pytest.mark.parametrize(("port", "name"), [(6650, "pulsar"), (9092, "kafka07")])
def test_well_known_ports_decide_at_once(port, name):
    assert Registry().by_port(conn(port)).name == name


def test_the_tls_port_decides_nothing_since_plaintext_pulsar_runs_there_too():
    assert Registry().by_port(conn(6651)) is None


@pytest.mark.parametrize("content_type", [0x16, 0x17], ids=["handshake", "application-data"])
def test_tls_is_recognised_by_its_record_header_but_never_decoded(content_type):
    record = bytes([content_type]) + CLIENT_HELLO[1:]
    decision = detect(Sniffer(conn(6651), 5 << 20), (Direction.C2B, record))
    assert decision.protocol.name == "tls" and decision.protocol.factory is None


def test_a_port_hint_adds_a_port_and_overrides_a_registered_one():
    registry = Registry({"pulsar": [16650, 9092]})
    assert registry.by_port(conn(16650)).name == "pulsar"
    assert registry.by_port(conn(9092)).name == "pulsar"
    assert {16650, 9092, 6650} <= registry.server_ports


def test_an_unregistered_port_is_left_to_the_content():
    assert Registry().by_port(conn(12345)) is None


def test_without_a_handshake_the_known_port_may_be_on_the_client_side():
    reversed_roles = conn(40000, ClientBy.GUESS, client_port=6650)
    assert Registry().by_port(reversed_roles).name == "pulsar"
    assert Registry().by_port(conn(40000, ClientBy.SYN, client_port=6650)) is None


def test_every_protocol_is_registered_once():
    names = [p.name for p in PROTOCOLS]
    assert len(names) == len(set(names))
    ports = [port for p in PROTOCOLS for port in p.ports]
    assert len(ports) == len(set(ports))


@pytest.mark.parametrize(
    ("chunks", "name"),
    [
        ([(Direction.C2B, CONNECT)], "pulsar"),
        ([(Direction.B2C, PING)], "pulsar"),
        ([(Direction.C2B, KAFKA_FETCH)], "kafka07"),
        ([(Direction.B2C, KAFKA_OFFSETS_ANSWER)], "kafka07"),
        ([(Direction.C2B, CLIENT_HELLO)], "tls"),
    ],
)
def test_content_decides_on_any_port(chunks, name):
    decision = detect(Sniffer(conn(12345), 5 << 20), *chunks)
    assert decision.protocol.name == name
    assert not decision.reversed


def test_bytes_are_buffered_until_the_first_frame_is_whole():
    sniffer = Sniffer(conn(12345), 5 << 20)
    assert sniffer.on_data(Direction.C2B, 1, 0, CONNECT[:5]) is None
    assert sniffer.on_data(Direction.C2B, 2, 5, CONNECT[5:12]) is None
    decision = sniffer.on_data(Direction.C2B, 3, 12, CONNECT[12:])
    assert decision.protocol.name == "pulsar"
    # Every event is kept for the decoder to replay.
    assert [e[4] for e in sniffer.events] == [CONNECT[:5], CONNECT[5:12], CONNECT[12:]]


def test_a_capture_starting_mid_frame_is_found_by_the_next_frame():
    tail_of_a_frame = b"\xaa" * 300
    decision = detect(Sniffer(conn(12345), 5 << 20), (Direction.C2B, tail_of_a_frame + PING + PING))
    assert decision.protocol.name == "pulsar"


def test_after_a_gap_only_the_bytes_after_it_are_tested():
    sniffer = Sniffer(conn(12345), 5 << 20)
    assert sniffer.on_data(Direction.C2B, 1, 0, CONNECT[:6]) is None
    sniffer.on_gap(Direction.C2B, 2, 6, 100)
    assert sniffer.on_data(Direction.C2B, 3, 106, PING).protocol.name == "pulsar"
    assert [e[0] for e in sniffer.events] == ["data", "gap", "data"]


def test_kafka_requests_from_the_server_side_mean_the_roles_are_reversed():
    decision = detect(Sniffer(conn(12345, ClientBy.GUESS), 5 << 20), (Direction.B2C, KAFKA_FETCH))
    assert decision.protocol.name == "kafka07"
    assert decision.reversed


def test_with_the_handshake_seen_the_roles_are_never_reversed():
    sniffer = Sniffer(conn(12345, ClientBy.SYN), 5 << 20)
    assert sniffer.on_data(Direction.B2C, 1, 0, KAFKA_FETCH) is None


def test_bytes_nobody_recognises_are_unknown_once_the_limit_is_passed():
    sniffer = Sniffer(conn(12345), 5 << 20, limit=4096)
    text = b"GET / HTTP/1.1\r\nHost: example\r\n" * 64
    decisions = [sniffer.on_data(Direction.C2B, 1, i * 1024, text[:1024]) for i in range(4)]
    assert decisions[:3] == [None, None, None]
    assert decisions[3].protocol is None


def test_a_stream_fed_a_byte_at_a_time_is_sniffed_in_linear_time():
    """Content tests run once the bytes have doubled, not on every segment: 256 KiB of
    unknown bytes, one per segment, took half a minute when each segment re-tested all."""
    sniffer = Sniffer(conn(8080), 5 << 20)
    noise = bytes(range(1, 250)) * 1100  # no protocol's first bytes, about 270 KB
    started = time.process_time()
    decision = detect(sniffer, *((Direction.C2B, noise[i : i + 1]) for i in range(len(noise))))
    assert decision is not None and decision.protocol is None  # gave up at the limit
    assert time.process_time() - started < 10  # quadratic testing takes minutes here


def test_a_direction_of_gaps_alone_is_given_up_after_a_bounded_number_of_them():
    """A capture of headers alone (a short snaplen) delivers gaps and never a byte: each
    one was kept until the connection closed, 90 bytes a segment for ever."""
    sniffer = Sniffer(conn(8080), 5 << 20)
    gaps = 0
    while (decision := sniffer.on_gap(Direction.C2B, 1, gaps * 1000, 1000)) is None:
        gaps += 1
    assert decision.protocol is None
    assert len(sniffer.events) == SNIFF_LIMIT // EVENT_BYTES
    assert sniffer.held == SNIFF_LIMIT


def test_giving_up_tests_the_bytes_that_came_since_the_last_test():
    """Bytes are tested again once they have doubled: a frame completed in between is
    still recognised when the sniffer must decide at once."""
    sniffer = Sniffer(conn(12345), 5 << 20)
    assert sniffer.on_data(Direction.C2B, 1, 0, CONNECT[:-2]) is None  # tested: cut short
    assert sniffer.on_data(Direction.C2B, 2, len(CONNECT) - 2, CONNECT[-2:]) is None  # not
    assert sniffer.give_up().protocol.name == "pulsar"
