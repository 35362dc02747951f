"""TCP reassembly on crafted edge cases: what a passive observer must get right.

Most conversations are fed segment by segment to a :class:`Reassembler`; a few are
written as pcap files with scapy and read back through :func:`read_streams`, so the whole
path (records, link and IP layers, reassembly) is exercised too.
"""

from __future__ import annotations

import struct

import pytest
from scapy.all import IP, TCP, UDP, Ether, Raw, wrpcap

from fuzz.stream_sink import Gap, RecordingSink
from pwcap.capture import CaptureStats, ClientBy, Connection, Direction, read_streams, reassembly
from pwcap.capture.reassembly import ACK, ACK_SLACK, FIN, RST, SYN, Reassembler

CLIENT_IP, SERVER_IP = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
C, S = 0, 1  # who sends: the client or the server
T0 = 1_700_000_000_000_000
PSH = 0x08


class OrderedSink(RecordingSink):
    """Also keeps every data and gap event in the order delivered, across directions."""

    def __init__(self) -> None:
        super().__init__()
        self.order: list[tuple[str, str, int]] = []  # direction, "data" | "gap", offset

    def on_data(self, conn, direction, ts, offset, data) -> None:
        super().on_data(conn, direction, ts, offset, data)
        self.order.append((direction.label, "data", offset))

    def on_gap(self, conn, direction, ts, offset, size) -> None:
        super().on_gap(conn, direction, ts, offset, size)
        self.order.append((direction.label, "gap", offset))


class Talk:
    """A conversation between 10.0.0.1 and 10.0.0.2, built one segment at a time.

    Each side's sequence number advances as it sends; ``seq`` overrides it (a
    retransmission, a segment sent out of order), ``ack`` defaults to everything the other
    side has sent so far.
    """

    def __init__(
        self,
        ports: tuple[int, int] = (40000, 6650),
        isn: tuple[int, int] = (1000, 900_000),
        server_ports: tuple[int, ...] = (6650,),
        sink: RecordingSink | None = None,
    ) -> None:
        self.sink = sink if sink is not None else OrderedSink()
        self.stats = CaptureStats()
        self.reassembler = Reassembler(self.sink, self.stats, server_ports)
        self.ports = ports
        self.next = list(isn)
        self.ts = T0

    def send(
        self,
        side: int,
        payload: bytes = b"",
        flags: int = ACK | PSH,
        seq: int | None = None,
        ack: int | None = None,
        cut: int = 0,
    ) -> None:
        self.ts += 10
        own = self.next[side] if seq is None else seq
        ips = (CLIENT_IP, SERVER_IP) if side == C else (SERVER_IP, CLIENT_IP)
        ports = self.ports if side == C else self.ports[::-1]
        theirs = self.next[1 - side] if ack is None else ack
        self.reassembler.segment(
            self.ts, ips[0], ports[0], ips[1], ports[1], own & 0xFFFFFFFF,
            theirs & 0xFFFFFFFF, flags, payload, cut,
        )  # fmt: skip
        if seq is None:
            self.next[side] += len(payload) + cut + (1 if flags & (SYN | FIN) else 0)

    def handshake(self) -> None:
        self.send(C, flags=SYN, ack=0)
        self.send(S, flags=SYN | ACK)
        self.send(C, flags=ACK)

    def close(self) -> None:
        self.send(C, flags=FIN | ACK)
        self.send(S, flags=FIN | ACK)
        self.send(C, flags=ACK)

    def only(self):
        """The one connection this conversation made."""
        (recorded,) = self.sink.connections.values()
        return recorded

    def stream(self, side: int):
        return self.only().stream(Direction.C2B if side == C else Direction.B2C)


# -- sequence space ---------------------------------------------------------------------------


def test_sequence_numbers_wrap_past_2_to_the_32():
    talk = Talk(isn=(2**32 - 6, 5))
    talk.handshake()
    for chunk in (b"abcd", b"efgh", b"ijkl"):  # the second crosses the wrap
        talk.send(C, chunk)
    talk.close()
    assert talk.stream(C).data == b"abcdefghijkl"
    assert talk.stream(C).gaps == []
    assert talk.only().close_reason == "fin"


def test_an_overlapping_retransmission_keeps_the_first_copy_of_each_byte():
    """The first copy was delivered already and is what the receiver's stack kept; the
    retransmission only contributes bytes never seen before."""
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"AAAAAAAA")
    talk.send(C, b"BBBBCCCC", seq=start + 4)  # 4 bytes overlap with different content
    talk.next[C] = start + 12
    talk.send(C, b"DD")
    assert talk.stream(C).data == b"AAAAAAAACCCCDD"
    assert talk.stats.retransmitted_bytes == 4


def test_an_early_segment_seen_twice_keeps_its_first_copy():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"XXXX", seq=start + 4)
    talk.send(C, b"YYYY", seq=start + 4)
    talk.send(C, b"0000", seq=start)
    talk.next[C] = start + 8
    talk.close()
    assert talk.stream(C).data == b"0000XXXX"
    assert talk.stats.retransmitted_bytes == 4


def test_a_keepalive_delivers_nothing():
    talk = Talk()
    talk.handshake()
    talk.send(C, b"hello")
    talk.send(C, b"\x00", seq=talk.next[C] - 1)  # keep-alive: one old byte
    talk.send(C, b"", seq=talk.next[C] - 1)  # keep-alive without data
    talk.send(C, b" world")
    assert talk.stream(C).data == b"hello world"
    assert talk.stream(C).gaps == []


def test_a_zero_window_probe_byte_is_delivered_once():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"H", seq=start)  # the probe: the next byte, alone
    talk.send(C, b"Hello", seq=start)  # the window opens: sent again with the rest
    talk.next[C] = start + 5
    talk.close()
    assert talk.stream(C).data == b"Hello"
    assert talk.stats.retransmitted_bytes == 1


# -- handshake, close, reuse ---------------------------------------------------------------------


def test_a_retransmitted_syn_is_still_one_connection():
    talk = Talk()
    talk.send(C, flags=SYN, ack=0)
    talk.send(C, flags=SYN, ack=0, seq=talk.next[C] - 1)  # the same SYN again
    talk.send(S, flags=SYN | ACK)
    talk.send(C, b"ping")
    talk.close()
    recorded = talk.only()
    assert recorded.stream(Direction.C2B).data == b"ping"
    assert recorded.conn.client_by == ClientBy.SYN


def test_a_syn_ack_without_its_syn_names_its_receiver_the_client():
    talk = Talk(ports=(6650, 40000), server_ports=())  # the client's port is the lower one
    talk.send(S, flags=SYN | ACK, ack=talk.next[C] + 1)
    talk.next[C] += 1
    talk.send(C, b"request")
    talk.send(S, b"answer")
    conn = talk.only().conn
    assert (conn.client_port, conn.server_port) == (6650, 40000)
    assert conn.client_by == ClientBy.SYN
    assert talk.only().stream(Direction.B2C).data == b"answer"


def test_rst_mid_stream_declares_the_hole_then_closes():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"abcd")
    talk.send(C, b"ijkl", seq=start + 8)  # 4 bytes never arrive
    talk.send(S, flags=RST | ACK, ack=start + 4)
    recorded = talk.only()
    stream = recorded.stream(Direction.C2B)
    assert stream.pieces == [b"abcd", Gap(4, 4, stream.gaps[0].ts), b"ijkl"]
    assert recorded.close_reason == "rst"


def test_a_new_syn_on_an_open_pair_ends_it_and_starts_another():
    talk = Talk()
    talk.handshake()
    talk.send(C, b"first life")
    talk.next = [77_000, 88_000]  # the client reuses its port with a new ISN
    talk.handshake()
    talk.send(C, b"second life")
    first, second = talk.sink.connections.values()
    assert first.close_reason == "reused"
    assert first.conn.conn_id != second.conn.conn_id
    assert first.stream(Direction.C2B).data == b"first life"
    assert second.stream(Direction.C2B).data == b"second life"


def test_a_closed_pair_reopened_by_a_syn_is_a_second_connection():
    talk = Talk()
    talk.handshake()
    talk.send(C, b"one")
    talk.close()
    talk.next = [5_000_000, 6_000_000]
    talk.handshake()
    talk.send(C, b"two")
    talk.reassembler.finish()
    reasons = [r.close_reason for r in talk.sink.connections.values()]
    assert reasons == ["fin", "end_of_capture"]


def test_a_syn_record_repeated_after_its_connection_ended_opens_one_with_another_id():
    talk = Talk()
    talk.handshake()
    talk.send(C, b"one")
    talk.close()
    talk.ts = T0  # the first SYN's record again, timestamp and all
    talk.send(C, flags=SYN, seq=1000, ack=0)
    talk.reassembler.finish()
    first, second = talk.sink.connections.values()
    assert first.conn.first_ts == second.conn.first_ts
    assert first.conn.conn_id != second.conn.conn_id


def test_stragglers_of_a_closed_connection_are_dropped_and_counted():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"data")
    talk.close()
    talk.send(C, b"data", seq=start)  # a late retransmission after both FINs
    assert talk.only().stream(Direction.C2B).data == b"data"
    assert talk.stats.after_close == 1
    assert len(talk.sink.connections) == 1


def test_late_bytes_before_a_fin_are_delivered_then_the_connection_closes():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"abcd")
    talk.send(C, b"ijkl", seq=start + 8)
    talk.send(C, flags=FIN | ACK, seq=start + 12)
    talk.send(S, flags=FIN | ACK, ack=start + 4)  # the server still waits for byte 4
    assert talk.only().close_reason is None
    talk.send(C, b"efgh", seq=start + 4)  # the missing bytes, late
    recorded = talk.only()
    assert recorded.stream(Direction.C2B).data == b"abcdefghijkl"
    assert recorded.stream(Direction.C2B).gaps == []
    assert recorded.close_reason == "fin"


def test_bytes_beyond_a_fin_are_not_delivered():
    talk = Talk()
    talk.handshake()
    talk.send(C, b"last")
    talk.send(C, flags=FIN | ACK)
    talk.send(C, b"after the end")
    assert talk.only().stream(Direction.C2B).data == b"last"
    assert talk.stats.after_close == 1


# -- holes ------------------------------------------------------------------------------------


def test_early_segments_come_out_in_order_with_their_own_timestamps():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"3333", seq=start + 8)
    talk.send(C, b"2222", seq=start + 4)
    talk.send(C, b"1111", seq=start)
    stream = talk.stream(C)
    assert stream.data == b"111122223333"
    sent_at = {offset: ts for offset, _, ts in stream.timestamps}
    assert sent_at[8] < sent_at[4] < sent_at[0]  # each chunk keeps its own capture time


def test_a_hole_never_filled_is_a_gap_of_its_exact_size_at_the_end():
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"abcd")
    talk.send(C, b"xyz", seq=start + 10)  # 6 bytes lost on the way, never acknowledged
    assert talk.stream(C).gaps == []  # a retransmission may still come
    talk.reassembler.finish()
    stream = talk.stream(C)
    assert [(g.offset, g.size) for g in stream.gaps] == [(4, 6)]
    assert stream.filled(ord("-")) == b"abcd------xyz"
    assert talk.only().close_reason == "end_of_capture"


def test_an_acknowledged_hole_becomes_a_gap_and_the_answer_waits_for_it():
    """The server acknowledged bytes the capture never showed: they will not be sent
    again. Its answer is delivered after the gap, never before the question."""
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    talk.send(C, b"GET ")
    talk.send(C, b"/key", seq=start + 8)  # bytes 4..8 missed by the capture
    talk.next[C] = start + 12
    talk.send(S, b"value")  # acknowledges all 12 bytes
    assert talk.stream(S).data == b""  # the answer waits for the question
    for _ in range(ACK_SLACK):
        talk.send(S, flags=ACK)
    assert talk.stream(C).filled(ord("?")) == b"GET ????/key"
    assert talk.stream(S).data == b"value"
    order = talk.sink.order
    assert order.index(("c2b", "gap", 4)) < order.index(("b2c", "data", 0))


def test_a_full_hold_buffer_gives_up_on_the_hole(monkeypatch):
    monkeypatch.setattr(reassembly, "MAX_HELD_SEGMENTS", 4)
    talk = Talk()
    talk.handshake()
    start = talk.next[C]
    for index in range(1, 7):  # byte 0 never comes; six early one-byte segments do
        talk.send(C, bytes([48 + index]), seq=start + index)
    stream = talk.stream(C)
    assert [(g.offset, g.size) for g in stream.gaps] == [(0, 1)]
    assert stream.data == b"123456"
    assert talk.stats.hold_overflows == 1


def test_connections_over_the_total_hold_budget_give_up_their_largest_holes(monkeypatch):
    monkeypatch.setattr(reassembly, "MAX_HELD_TOTAL", 100)
    first = Talk(ports=(40000, 6650))
    talks = [first, Talk(ports=(40001, 6650)), Talk(ports=(40002, 6650))]
    for talk in talks[1:]:  # three connections through one reassembler
        talk.reassembler, talk.sink, talk.stats = first.reassembler, first.sink, first.stats
    for talk, size in zip(talks, (30, 50, 40), strict=True):
        talk.handshake()
        talk.send(C, b"x" * size, seq=talk.next[C] + 1)  # each misses its first byte
    # 30 + 50 + 40 held is over 100: the largest holder gives up until 75 at most are held.
    recorded = first.sink.connections.values()
    small, large, medium = (connection.stream(Direction.C2B) for connection in recorded)
    assert (small.data, medium.data) == (b"", b"")
    assert large.data == b"x" * 50 and [(g.offset, g.size) for g in large.gaps] == [(0, 1)]
    assert first.stats.hold_overflows == 1
    talks[1].send(C, b"y", seq=talks[1].next[C])  # the retransmission comes too late: not twice
    assert large.data == b"x" * 50


def test_a_snaplen_cut_is_a_gap_right_after_the_captured_bytes():
    talk = Talk()
    talk.handshake()
    talk.send(C, b"head", cut=6)  # a 10-byte segment captured with its first 4 bytes
    talk.send(C, b"next")
    stream = talk.stream(C)
    assert stream.pieces == [b"head", Gap(4, 6, stream.gaps[0].ts), b"next"]


# -- who is the client --------------------------------------------------------------------------


def test_without_a_handshake_a_known_server_port_names_the_client():
    talk = Talk(ports=(40000, 6650), server_ports=(6650,))
    talk.send(S, b"pushed first")  # the broker speaks first in this capture
    conn = talk.only().conn
    assert (conn.client_port, conn.server_port, conn.client_by) == (40000, 6650, ClientBy.PORT)
    assert talk.only().stream(Direction.B2C).data == b"pushed first"


def test_without_a_handshake_or_a_known_port_the_lower_port_is_the_server():
    talk = Talk(ports=(40000, 5000), server_ports=())
    talk.send(S, b"from 5000")
    conn = talk.only().conn
    assert (conn.client_port, conn.server_port, conn.client_by) == (40000, 5000, ClientBy.GUESS)


class SwappingSink(OrderedSink):
    """Overturns reassembly's guess at once, as the decoder does when content says so."""

    def on_open(self, conn: Connection) -> None:
        conn.flip()
        super().on_open(conn)


def test_deliveries_follow_a_swap_of_roles():
    talk = Talk(ports=(40000, 5000), server_ports=(), sink=SwappingSink())
    talk.send(C, b"from 40000")  # reassembly guessed 40000 is the client; the sink disagrees
    talk.send(S, b"from 5000")
    recorded = talk.only()
    assert recorded.conn.client_port == 5000 and recorded.conn.flipped
    assert recorded.stream(Direction.C2B).data == b"from 5000"
    assert recorded.stream(Direction.B2C).data == b"from 40000"


class OverturningSink(OrderedSink):
    """Overturns reassembly's guess while taking the first bytes, as a decoder does once
    the content of a frame proves the roles the other way round."""

    def on_data(self, conn, direction, ts, offset, data) -> None:
        super().on_data(conn, direction, ts, offset, data)
        if not conn.flipped:
            conn.flip()
            recorded = self.connections[conn.conn_id]  # its streams swap sides with it
            recorded.streams = recorded.streams[::-1]


def test_the_bytes_that_overturn_the_roles_count_for_their_true_sender():
    talk = Talk(ports=(40000, 5000), server_ports=(), sink=OverturningSink())
    talk.send(C, b"from 40000")  # taken for the client's; they prove 40000 the server
    talk.send(S, b"from 5000, the client")
    conn = talk.only().conn
    assert (conn.client_port, conn.server_port) == (5000, 40000)
    assert conn.bytes == [len(b"from 5000, the client"), len(b"from 40000")]  # c2b, b2c


# -- identity and memory ----------------------------------------------------------------------


def _conversation_ids(isn: tuple[int, int]) -> list[int]:
    talk = Talk(isn=isn)
    talk.handshake()
    talk.send(C, b"x")
    talk.close()
    return list(talk.sink.connections)


def test_connection_ids_are_the_same_in_every_run_and_fit_63_bits():
    first, again = _conversation_ids((1, 2)), _conversation_ids((1, 2))
    assert first == again
    assert 0 <= first[0] < 2**63


def test_too_many_open_connections_close_the_longest_idle(monkeypatch):
    monkeypatch.setattr(reassembly, "MAX_OPEN", 4)
    sink = RecordingSink()
    stats = CaptureStats()
    reassembler = Reassembler(sink, stats, server_ports=(6650,))
    for index in range(6):
        reassembler.segment(T0 + index, CLIENT_IP, 40000 + index, SERVER_IP, 6650, 1, 0, ACK, b"x")
    reasons = [r.close_reason for r in sink.connections.values()]
    assert reasons[:2] == ["evicted", "evicted"] and set(reasons[2:]) == {None}
    assert stats.evicted == 2
    assert reassembler.open_connections() == 4


# -- the whole path, from a pcap file ---------------------------------------------------------


def _packet(sender: tuple, receiver: tuple, flags: str, seq: int, ack: int, data: bytes = b""):
    tcp = TCP(sport=sender[1], dport=receiver[1], flags=flags, seq=seq % 2**32, ack=ack % 2**32)
    return Ether() / IP(src=sender[0], dst=receiver[0]) / (tcp / Raw(data) if data else tcp)


CLIENT = ("10.1.1.1", 41000)
BROKER = ("10.1.1.2", 6650)


def test_a_crafted_capture_with_wrap_keepalive_and_retransmission_reads_back(tmp_path):
    c, s = 2**32 - 3, 7  # initial sequence numbers: the client's wraps after 2 bytes
    packets = [
        _packet(CLIENT, BROKER, "S", c, 0),
        _packet(BROKER, CLIENT, "SA", s, c + 1),
        _packet(CLIENT, BROKER, "A", c + 1, s + 1),
        _packet(CLIENT, BROKER, "PA", c + 1, s + 1, b"across"),
        _packet(CLIENT, BROKER, "PA", c + 1, s + 1, b"across"),  # retransmitted
        _packet(CLIENT, BROKER, "A", c + 6, s + 1, b"s"),  # keep-alive: the last byte again
        _packet(CLIENT, BROKER, "PA", c + 7, s + 1, b" wrap"),
        _packet(BROKER, CLIENT, "PA", s + 1, c + 12, b"ok"),
    ]
    for index, packet in enumerate(packets):
        packet.time = 1_700_000_000 + index / 1000
        packet[IP].id = index + 1  # as a sender numbers its packets: a copy has its own
    path = tmp_path / "crafted.pcap"
    wrpcap(str(path), packets)
    sink = RecordingSink()
    stats = read_streams(path, sink, server_ports={6650})
    (recorded,) = sink.connections.values()
    assert recorded.stream(Direction.C2B).data == b"across wrap"
    assert recorded.stream(Direction.B2C).data == b"ok"
    assert stats.retransmitted_bytes == len(b"across") + 1  # the copy, and the keep-alive
    assert recorded.close_reason == "end_of_capture"
    assert recorded.stream(Direction.C2B).timestamps[0][2] == 1_700_000_000_003_000


def test_a_packet_captured_twice_is_taken_once(tmp_path):
    """A SPAN port mirroring both directions of a link gives every packet twice, the
    second a hop later (its TTL one less): a duplicate, not a retransmission."""
    c, s = 1000, 7
    packets = [
        _packet(CLIENT, BROKER, "S", c, 0),
        _packet(BROKER, CLIENT, "SA", s, c + 1),
        _packet(CLIENT, BROKER, "PA", c + 1, s + 1, b"hello"),
        _packet(BROKER, CLIENT, "PA", s + 1, c + 6, b"ok"),
    ]
    doubled = []
    for index, packet in enumerate(packets):
        packet[IP].id = index + 1
        packet.time = 1_700_000_000 + index / 1000
        copy = packet.copy()
        copy[IP].ttl -= 1
        copy.time = packet.time + 0.000_010
        doubled += [packet, copy]
    path = tmp_path / "doubled.pcap"
    wrpcap(str(path), doubled)
    sink = RecordingSink()
    stats = read_streams(path, sink, server_ports={6650})
    (recorded,) = sink.connections.values()
    assert recorded.stream(Direction.C2B).data == b"hello"
    assert recorded.stream(Direction.B2C).data == b"ok"
    assert stats.duplicates == len(packets)
    assert stats.tcp_segments == len(packets)
    assert stats.retransmitted_bytes == 0


class _StopAfter(RecordingSink):
    """Takes ``count`` deliveries, then stops the run as an interrupt would."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.left = count

    def on_data(self, conn, direction, ts, offset, data) -> None:
        super().on_data(conn, direction, ts, offset, data)
        self.left -= 1
        if not self.left:
            raise KeyboardInterrupt


def test_every_tcp_segment_is_counted_also_when_the_run_stops_early(tmp_path):
    packets = [_packet(CLIENT, BROKER, "S", 100, 0), _packet(BROKER, CLIENT, "SA", 500, 101)]
    packets += [_packet(CLIENT, BROKER, "PA", 101 + 2 * i, 501, b"hi") for i in range(5)]
    packets.insert(3, Ether() / IP(src=CLIENT[0], dst=BROKER[0]) / UDP() / Raw(b"dns?"))
    path = tmp_path / "counted.pcap"
    wrpcap(str(path), packets)
    stats = read_streams(path, RecordingSink())
    assert (stats.records, stats.tcp_segments) == (len(packets), len(packets) - 1)
    stopped = CaptureStats()
    with pytest.raises(KeyboardInterrupt):
        read_streams(path, _StopAfter(2), stats=stopped)
    # The second delivery is the fourth TCP segment (after the handshake's two and the UDP).
    assert (stopped.records, stopped.tcp_segments) == (5, 4)


@pytest.mark.parametrize("flags", ["R", "RA"])
def test_a_crafted_reset_closes_with_rst(tmp_path, flags):
    packets = [
        _packet(CLIENT, BROKER, "S", 100, 0),
        _packet(BROKER, CLIENT, "SA", 500, 101),
        _packet(CLIENT, BROKER, "PA", 101, 501, b"hello"),
        _packet(BROKER, CLIENT, flags, 501, 106),
    ]
    path = tmp_path / "reset.pcap"
    wrpcap(str(path), packets)
    sink = RecordingSink()
    read_streams(path, sink)
    (recorded,) = sink.connections.values()
    assert recorded.stream(Direction.C2B).data == b"hello"
    assert recorded.close_reason == "rst"


def test_a_tcp_header_longer_than_its_cut_packet_declares_no_negative_gap(tmp_path):
    """A TCP header length (60 bytes) past the IP packet's end, the packet cut by the
    snaplen: no payload and nothing missing, not a gap of minus the overrun."""
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 45, 0, 0, 64, 6, 0, CLIENT_IP, SERVER_IP)
    tcp = struct.pack(">HHIIBBHHH", 40000, 6650, 101, 0, 0xF0, 0x18, 65535, 0, 0)
    frame = b"\x02" * 12 + b"\x08\x00" + ip + tcp + b"hello"
    path = tmp_path / "overrun.pcap"
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, len(frame) - 1, 1)
    record = struct.pack("<IIII", 1_700_000_000, 0, len(frame) - 1, len(frame))
    path.write_bytes(header + record + frame[:-1])
    sink = RecordingSink()  # asserts every gap is more than zero bytes
    read_streams(path, sink, server_ports={6650})
    for recorded in sink.connections.values():
        assert recorded.stream(Direction.C2B).length == 0
