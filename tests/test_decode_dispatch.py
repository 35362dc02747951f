"""The connection dispatcher between reassembly and the decoders, fed stream events directly.

Real captures go through it in tests/test_decode_samples.py; here each behaviour is
pinned with a conversation built frame by frame.
"""

from __future__ import annotations

import pytest

from pwcap.capture.events import ClientBy, Connection, Direction
from pwcap.decode import dispatch
from pwcap.decode.api import DecodeOptions
from pwcap.decode.dispatch import Dispatcher
from pwcap.decode.registry import Registry
from tests import kafka07_frames as kafka
from tests.pulsar_frames import RecordingSink, command, frame

CONNECT = frame(command("CONNECT", client_version="Pulsar-Java-v3.1", protocol_version=21))
CONNECTED = frame(command("CONNECTED", server_version="Pulsar-Broker-v3.1", protocol_version=21))
PING = frame(command("PING"))
PONG = frame(command("PONG"))
T0 = 1_700_000_000_000_000


class Harness:
    """A dispatcher with its rows kept, and helpers that play the capture layer's part."""

    def __init__(self, hints: dict | None = None) -> None:
        self.rows = RecordingSink()
        self.connections: list[dict] = []
        self.dispatcher = Dispatcher(
            self.rows.rows,
            self.connections.append,
            Registry(hints),
            DecodeOptions(capture="test.pcap"),
        )
        self.offsets: dict[tuple[int, int], int] = {}

    def open(self, server_port: int, client_by: ClientBy = ClientBy.SYN, conn_id: int = 1):
        conn = Connection(conn_id, "10.0.0.1", 40000, "10.0.0.2", server_port, T0, client_by)
        self.dispatcher.on_open(conn)
        return conn

    def send(self, conn: Connection, direction: Direction, data: bytes, ts: int = T0) -> None:
        key = (conn.conn_id, direction)
        offset = self.offsets.get(key, 0)
        conn.bytes[direction] += len(data)
        conn.last_ts = ts
        self.dispatcher.on_data(conn, direction, ts, offset, data)
        self.offsets[key] = offset + len(data)

    def lose(self, conn: Connection, direction: Direction, size: int, ts: int = T0) -> None:
        key = (conn.conn_id, direction)
        offset = self.offsets.get(key, 0)
        conn.gaps += 1
        conn.gap_bytes[direction] += size
        self.dispatcher.on_gap(conn, direction, ts, offset, size)
        self.offsets[key] = offset + size

    def close(self, conn: Connection, reason: str = "fin") -> dict:
        self.dispatcher.on_close(conn, conn.last_ts, reason)
        return self.connections[-1]

    def commands(self) -> list[tuple[str, str]]:
        return [(r["direction"], r["command"]) for r in self.rows.frames]


def test_pulsar_on_its_port_is_decoded_and_its_connection_row_written():
    h = Harness()
    conn = h.open(6650)
    h.send(conn, Direction.C2B, CONNECT)
    h.send(conn, Direction.B2C, CONNECTED, T0 + 5)
    row = h.close(conn)
    assert h.commands() == [("c2b", "CONNECT"), ("b2c", "CONNECTED")]
    assert row["protocol"] == "pulsar"
    assert row["client_version"] == "Pulsar-Java-v3.1"
    assert row["server_version"] == "Pulsar-Broker-v3.1"
    assert (row["frames_c2b"], row["frames_b2c"]) == (1, 1)
    assert (row["bytes_c2b"], row["bytes_b2c"]) == (len(CONNECT), len(CONNECTED))
    assert (row["first_ts"], row["last_ts"]) == (T0, T0 + 5)
    assert row["client_by"] == "syn" and row["close_reason"] == "fin"
    assert row["flipped"] is False
    assert row["anomalies"] == 0 and row["gaps"] == 0


def test_pulsar_on_another_port_is_found_by_content_and_nothing_before_is_lost():
    h = Harness()
    conn = h.open(16650)
    h.send(conn, Direction.C2B, CONNECT[:7])  # not enough to decide
    h.send(conn, Direction.C2B, CONNECT[7:])
    h.send(conn, Direction.B2C, CONNECTED)
    assert h.commands() == [("c2b", "CONNECT"), ("b2c", "CONNECTED")]
    assert h.close(conn)["protocol"] == "pulsar"


def test_a_port_hint_decides_without_looking_at_the_content():
    h = Harness({"pulsar": [16650]})
    conn = h.open(16650)
    h.send(conn, Direction.C2B, PING[:3])
    assert h.dispatcher.open_connections() == 1
    h.send(conn, Direction.C2B, PING[3:])
    assert h.commands() == [("c2b", "PING")]


def test_every_gap_is_an_anomaly_row_and_counted_on_the_connection():
    h = Harness()
    conn = h.open(6650)
    h.send(conn, Direction.C2B, CONNECT)
    h.lose(conn, Direction.C2B, len(PING))
    h.send(conn, Direction.C2B, PING)
    gaps = [a for a in h.rows.anomalies if a["kind"] == "gap"]
    assert len(gaps) == 1
    gap = gaps[0]
    assert (gap["direction"], gap["stream_offset"], gap["size"]) == ("c2b", len(CONNECT), len(PING))
    assert gap["protocol"] == "pulsar" and gap["conn_id"] == conn.conn_id
    row = h.close(conn)
    assert row["gaps"] == 1 and row["gap_bytes"] == len(PING)
    assert row["anomalies"] == len(h.rows.anomalies)
    assert ("c2b", "PING") in h.commands()  # decoding went on after the gap


TLS_RECORD = bytes([0x16, 0x03, 0x01, 0x00, 0x10]) + bytes(16)  # a handshake record


def test_tls_without_its_handshake_is_reported_and_never_decoded():
    h = Harness()
    conn = h.open(6651)
    h.send(conn, Direction.C2B, TLS_RECORD + CONNECT)  # even bytes that would decode stay
    h.lose(conn, Direction.C2B, 100)
    row = h.close(conn)
    assert h.rows.frames == []  # no ClientHello, no keys: nothing decoded, and said once
    assert [(a["protocol"], a["kind"]) for a in h.rows.anomalies] == [
        ("tls", "tls_handshake_missing")
    ]
    assert row["protocol"] == "tls" and row["bytes_c2b"] == len(TLS_RECORD + CONNECT)
    assert row["tls_status"] == "handshake_missing" and row["tls_decrypted"] is False
    assert row["gaps"] == 1 and row["anomalies"] == 1


def test_plaintext_pulsar_on_the_tls_port_is_decoded_by_its_content():
    h = Harness()
    conn = h.open(6651)
    h.send(conn, Direction.C2B, CONNECT)
    h.send(conn, Direction.B2C, CONNECTED)
    row = h.close(conn)
    assert row["protocol"] == "pulsar"
    assert h.commands() == [("c2b", "CONNECT"), ("b2c", "CONNECTED")]


def test_a_connection_nobody_recognises_is_unknown():
    h = Harness()
    conn = h.open(8080)
    h.send(conn, Direction.C2B, b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
    row = h.close(conn)
    assert row["protocol"] == "unknown"
    assert (row["frames_c2b"], row["frames_b2c"]) == (0, 0)
    assert h.rows.frames == []
    assert [(a["protocol"], a["kind"]) for a in h.rows.anomalies] == [("unknown", "not_decoded")]


def test_kafka_found_by_content_with_the_roles_reversed_swaps_them():
    h = Harness()
    conn = h.open(40001, ClientBy.GUESS)  # reassembly guessed: the broker spoke first
    fetch = kafka.request(kafka.FETCH, kafka.fetch_body("events", 0, 0, 300_000))
    h.send(conn, Direction.B2C, fetch)
    # Reassembly labels later bytes by the swapped roles: the answer is broker to client.
    answer = kafka.response(0, kafka.message(b"hello") + kafka.message(b"world"))
    h.dispatcher.on_data(conn, Direction.B2C, T0 + 1, 0, answer)
    row = h.close(conn)
    assert row["protocol"] == "kafka07"
    assert row["client_by"] == "content" and row["flipped"] is True
    assert (row["client_port"], row["server_port"]) == (40001, 40000)
    assert [c for _, c in h.commands()] == ["FETCH", "FETCH_RESPONSE"]
    assert h.commands()[0][0] == "c2b"


def test_connections_left_open_are_closed_at_the_end_of_the_capture():
    h = Harness()
    conn = h.open(6650)
    h.send(conn, Direction.C2B, PING)
    h.dispatcher.close_all("end_of_capture")
    assert [r["close_reason"] for r in h.connections] == ["end_of_capture"]
    assert h.dispatcher.open_connections() == 0


@pytest.mark.parametrize("port", [6650, 16650])
def test_stream_bytes_tell_the_progress(port):
    h = Harness()
    conn = h.open(port)
    h.send(conn, Direction.C2B, PING)
    h.send(conn, Direction.B2C, PONG)
    assert h.dispatcher.stream_bytes() == len(PING) + len(PONG)
    h.close(conn)
    assert h.dispatcher.stream_bytes() == len(PING) + len(PONG)


def test_a_gap_met_while_sniffing_is_written_for_the_protocol_the_content_shows():
    h = Harness()
    conn = h.open(12345)  # no port hint: the content decides
    h.send(conn, Direction.C2B, CONNECT)
    h.lose(conn, Direction.B2C, 100)
    h.send(conn, Direction.B2C, CONNECTED)
    row = h.close(conn)
    assert row["protocol"] == "pulsar"
    assert [(a["protocol"], a["kind"], a["direction"]) for a in h.rows.anomalies] == [
        ("pulsar", "gap", "b2c")
    ]
    assert row["anomalies"] == 1


def test_a_gap_in_a_stream_never_recognised_is_no_decoding_anomaly():
    h = Harness()
    conn = h.open(8080)
    h.send(conn, Direction.C2B, b"GET / HTTP/1.1\r\n")
    h.lose(conn, Direction.C2B, 100)
    h.send(conn, Direction.C2B, b"Host: example\r\n\r\n")
    row = h.close(conn)
    assert row["protocol"] == "unknown" and row["gaps"] == 1
    assert [a["kind"] for a in h.rows.anomalies] == ["not_decoded"] and row["anomalies"] == 1


def test_a_connection_joined_late_says_so_once_per_direction_that_spoke():
    h = Harness()
    conn = h.open(6650, ClientBy.PORT)  # no handshake: the capture began mid-connection
    h.send(conn, Direction.C2B, CONNECT)
    row = h.close(conn)
    assert row["midstream"] is True
    assert [(a["kind"], a["direction"], a["stream_offset"]) for a in h.rows.anomalies] == [
        ("midstream", "c2b", 0)
    ]
    assert row["anomalies"] == 1


def test_a_connection_seen_from_its_handshake_is_not_midstream():
    h = Harness()
    conn = h.open(6650)
    h.send(conn, Direction.C2B, CONNECT)
    row = h.close(conn)
    assert row["midstream"] is False and h.rows.anomalies == []


def test_undecided_connections_together_hold_no_more_than_the_sniffing_budget(monkeypatch):
    """Each undecided connection buffers up to 256 KiB a direction, and 10,000 may be
    open: 1,500 of them holding 200 KB each reached 600 MB. Past the budget, the ones
    holding most decide from what they have, and the undecided say why."""
    monkeypatch.setattr(dispatch, "SNIFF_TOTAL", 64 << 10)
    h = Harness()
    pulsar = h.open(16650, conn_id=1000)  # its CONNECT is complete but not tested yet
    h.send(pulsar, Direction.C2B, CONNECT[:-2])
    h.send(pulsar, Direction.C2B, CONNECT[-2:])
    h.send(pulsar, Direction.B2C, bytes(range(1, 250)) * 120)  # the largest holder
    others = [h.open(20000 + n, conn_id=n) for n in range(40)]
    peak = 0
    for _ in range(8):
        for conn in others:
            h.send(conn, Direction.C2B, bytes(range(1, 250)) * 4)  # nothing recognisable
            peak = max(peak, h.dispatcher._sniffed)
    assert peak <= 64 << 10
    assert h.commands()[0] == ("c2b", "CONNECT")
    assert h.close(pulsar)["protocol"] == "pulsar"
    rows = [h.close(conn) for conn in others]
    assert {row["protocol"] for row in rows} == {"unknown"}
    details = [row["detail"] for row in h.rows.anomalies if row["kind"] == "not_decoded"]
    assert len(details) == len(others)
    assert sum("recognition stopped early" in detail for detail in details) > len(others) // 2


def test_a_connection_whose_bytes_the_capture_never_kept_says_so():
    """A capture of headers alone (a short snaplen) on a port no protocol owns: gaps only,
    nothing to recognise, and once no row said a word about the connection's traffic."""
    h = Harness()
    conn = h.open(8080)
    for _ in range(3):
        h.lose(conn, Direction.C2B, 1000)
    h.lose(conn, Direction.B2C, 500)
    row = h.close(conn)
    assert row["protocol"] == "unknown" and row["anomalies"] == 1
    [anomaly] = h.rows.anomalies
    assert (anomaly["kind"], anomaly["size"]) == ("not_decoded", 3500)
    assert "none of them is in the capture" in anomaly["detail"]
