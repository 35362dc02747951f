"""What each side's TCP segments show of the transport (``capture/tcpflow.py``), read from
crafted captures through the whole path: records, IP, the TCP header and its SYN
options, reassembly. Every expected number is set by the crafted timing itself."""

from __future__ import annotations

from pathlib import Path

from scapy.all import IP, TCP, Ether, Raw, wrpcap

from fuzz.stream_sink import RecordingSink
from pwcap.capture import read_streams
from pwcap.capture.tcpflow import tcp_columns

CLIENT, BROKER = "10.0.0.1", "10.0.0.2"
T0 = 1_700_000_000.0  # seconds


class ColumnsSink(RecordingSink):
    """Keeps the TCP columns of each connection as it closes."""

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[dict] = []

    def on_close(self, conn, ts, reason) -> None:
        super().on_close(conn, ts, reason)
        self.columns.append(tcp_columns(*conn.tcp))


def _packet(ms: float, client: bool, flags: str, seq: int, ack: int, **tcp) -> Ether:
    ends = (CLIENT, BROKER, 40000, 6650) if client else (BROKER, CLIENT, 6650, 40000)
    payload = tcp.pop("payload", b"")
    segment = TCP(sport=ends[2], dport=ends[3], flags=flags, seq=seq, ack=ack, **tcp)
    # Each datagram numbered by its sender, as stacks do: a resend is not a mirror's copy.
    ident = round(ms * 10) & 0xFFFF
    packet = Ether() / IP(src=ends[0], dst=ends[1], id=ident) / segment
    if payload:
        packet = packet / Raw(payload)
    packet.time = T0 + ms / 1000
    return packet


def _read(tmp_path: Path, packets: list[Ether]) -> dict:
    path = tmp_path / "crafted.pcap"
    wrpcap(str(path), packets)
    sink = ColumnsSink()
    read_streams(path, sink, server_ports=(6650,))
    (columns,) = sink.columns
    return columns


def test_round_trips_windows_and_resends_are_measured_at_the_capture_point(tmp_path):
    c, b = 1000, 5000  # initial sequence numbers
    data = b"x" * 100
    packets = [
        _packet(0, True, "S", c, 0, window=64240, options=[("MSS", 1460), ("WScale", 7)]),
        _packet(2, False, "SA", b, c + 1, window=65160, options=[("WScale", 8), ("NOP", None)]),
        _packet(3, True, "A", c + 1, b + 1, window=502),
        # The client's data, acknowledged by the broker 10 ms later: a round trip to it.
        _packet(10, True, "PA", c + 1, b + 1, window=502, payload=data),
        _packet(20, False, "A", b + 1, c + 101, window=0),  # the broker's buffer is full
        _packet(50, True, "PA", c + 101, b + 1, window=502, payload=data),
        _packet(60, True, "PA", c + 101, b + 1, window=502, payload=data),  # sent again
        _packet(320, False, "A", b + 1, c + 201, window=40),  # open again after 300 ms
        _packet(330, False, "PA", b + 1, c + 201, window=40, payload=data),
        _packet(331, True, "A", c + 201, b + 101, window=502),  # the client's round trip
        _packet(400, True, "FA", c + 201, b + 101, window=502),
        _packet(401, False, "FA", b + 101, c + 202, window=40),
        _packet(402, True, "A", c + 202, b + 102, window=502),
    ]
    columns = _read(tmp_path, packets)
    assert columns["tcp_rtt_broker_handshake_us"] == 2_000
    assert columns["tcp_rtt_client_handshake_us"] == 1_000
    # Timed: the first data (10 ms) and the broker's data (1 ms); the resent one is not.
    assert columns["tcp_rtt_broker_samples"] == 1
    assert columns["tcp_rtt_broker_min_us"] == columns["tcp_rtt_broker_max_us"] == 10_000
    assert columns["tcp_rtt_client_samples"] == 1
    assert columns["tcp_rtt_client_min_us"] == 1_000
    assert columns["tcp_window_scale_client"] == 7
    assert columns["tcp_window_scale_broker"] == 8
    assert columns["tcp_min_window_client"] == 502 << 7
    assert columns["tcp_min_window_broker"] == 0
    assert columns["tcp_zero_windows_broker"] == 1
    assert columns["tcp_zero_window_us_broker"] == 300_000
    assert columns["tcp_longest_zero_window_us_broker"] == 300_000
    assert columns["tcp_longest_zero_window_ts_broker"] == int(T0 * 1e6) + 20_000
    assert columns["tcp_zero_windows_client"] == 0
    assert columns["tcp_retransmissions_client"] == 1
    assert columns["tcp_retransmitted_bytes_client"] == 100
    assert columns["tcp_retransmission_burst_client"] == 1
    assert columns["tcp_retransmissions_broker"] == 0


def test_a_window_is_not_scaled_unless_both_syns_offer_it(tmp_path):
    c, b = 1000, 5000
    packets = [
        _packet(0, True, "S", c, 0, window=64240, options=[("WScale", 7)]),
        _packet(1, False, "SA", b, c + 1, window=65160),
        _packet(2, True, "A", c + 1, b + 1, window=300),
        _packet(3, True, "FA", c + 1, b + 1, window=300),
        _packet(4, False, "FA", b + 1, c + 2, window=200),
        _packet(5, True, "A", c + 2, b + 2, window=300),
    ]
    columns = _read(tmp_path, packets)
    assert columns["tcp_window_scale_client"] == 7
    assert columns["tcp_window_scale_broker"] is None
    assert columns["tcp_min_window_client"] == 300
    assert columns["tcp_min_window_broker"] == 200


def test_a_zero_window_still_open_at_the_end_lasts_to_the_last_segment(tmp_path):
    c, b = 1000, 5000
    packets = [
        _packet(0, True, "S", c, 0),
        _packet(1, False, "SA", b, c + 1),
        _packet(2, True, "A", c + 1, b + 1, window=0),
        _packet(500, True, "A", c + 1, b + 1, window=0),
    ]
    columns = _read(tmp_path, packets)
    assert columns["tcp_zero_windows_client"] == 1
    assert columns["tcp_zero_window_us_client"] == 498_000
