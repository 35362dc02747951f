"""Derived captures: real captures with packets lost, reordered or duplicated, or cut.

Every derivation is an ``order``: the original record indices the new capture holds, in
its order (a missing index was dropped, a repeated one duplicated). Output timestamps stay
monotonic: a record keeps its own timestamp unless that is earlier than the previous
output record's, in which case it takes that one. The manifest also names the stream bytes
each change touches, so tests and decoders can check exactly what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuzz.pcapfile import Capture, Record, Segment, tcp_segment


@dataclass(frozen=True)
class DataPacket:
    index: int
    client: str
    server: str
    direction: str
    offset: int  # of the first payload byte, counted from the byte after the SYN
    length: int


def data_packets(capture: Capture) -> list[DataPacket]:
    """Every payload-carrying TCP record, placed in its connection's byte stream."""
    isn: dict[tuple[str, str], int] = {}
    clients: dict[frozenset[str], str] = {}
    packets = []
    for index, record in enumerate(capture.records):
        segment = tcp_segment(record)
        if segment is None:
            continue
        if segment.syn:
            isn[(segment.src, segment.dst)] = segment.seq
            if not segment.flags & 0x10:  # SYN without ACK: the sender is the client
                clients[frozenset((segment.src, segment.dst))] = segment.src
        if segment.payload_len and (segment.src, segment.dst) in isn:
            packets.append(_place(index, segment, isn, clients))
    return packets


def _place(
    index: int,
    segment: Segment,
    isn: dict[tuple[str, str], int],
    clients: dict[frozenset[str], str],
) -> DataPacket:
    client = clients[frozenset((segment.src, segment.dst))]
    server = segment.dst if segment.src == client else segment.src
    offset = (segment.seq - isn[(segment.src, segment.dst)] - 1) % 2**32
    direction = "c2b" if segment.src == client else "b2c"
    return DataPacket(index, client, server, direction, offset, segment.payload_len)


def apply_order(capture: Capture, order: list[int]) -> Capture:
    records: list[Record] = []
    for index in order:
        record = capture.records[index]
        if records and record.ts_us < records[-1].ts_us:
            previous = records[-1]
            record = Record(previous.ts_sec, previous.ts_usec, record.orig_len, record.data)
        records.append(record)
    return Capture(capture.linktype, capture.snaplen, records)


def byte_range(packet: DataPacket) -> dict[str, object]:
    return {
        "packet": packet.index,
        "client": packet.client,
        "server": packet.server,
        "direction": packet.direction,
        "offset": packet.offset,
        "length": packet.length,
    }


def _picks(packets: list[DataPacket], fractions: list[float]) -> list[DataPacket]:
    return [packets[int(len(packets) * f)] for f in fractions]


def lost(capture: Capture) -> dict[str, object]:
    """Drop three payload segments (early, middle, late) as a lossy capture point would."""
    dropped = _picks(data_packets(capture), [0.3, 0.5, 0.7])
    gone = {p.index for p in dropped}
    order = [i for i in range(len(capture.records)) if i not in gone]
    return {"kind": "lost", "order": order, "missing": [byte_range(p) for p in dropped]}


def reordered(capture: Capture) -> dict[str, object]:
    """Swap three pairs of consecutive records, each pair carrying payload one way."""
    packets = data_packets(capture)
    order = list(range(len(capture.records)))
    swapped = []
    for first in _picks(packets, [0.25, 0.5, 0.75]):
        position = order.index(first.index)
        order[position], order[position + 1] = order[position + 1], order[position]
        swapped.append([first.index, first.index + 1])
    return {"kind": "reordered", "order": order, "swapped": swapped}


def duplicated(capture: Capture) -> dict[str, object]:
    """Repeat three payload segments: right after themselves, and five records later."""
    packets = _picks(data_packets(capture), [0.2, 0.45, 0.7])
    insert_after = {packets[0].index: packets[0].index, packets[1].index + 5: packets[1].index}
    insert_after[packets[2].index + 1] = packets[2].index
    order = []
    for index in range(len(capture.records)):
        order.append(index)
        if index in insert_after:
            order.append(insert_after[index])
    repeats = [byte_range(p) for p in packets]
    return {"kind": "duplicated", "order": order, "duplicates": repeats}


def midstream(capture: Capture) -> dict[str, object]:
    """Start the capture at a payload segment a third of the way in (no handshake seen)."""
    packets = data_packets(capture)
    start = _picks(packets, [0.33])[0]
    first_bytes = {}
    for packet in packets:
        if packet.index >= start.index:
            first_bytes.setdefault(
                f"{packet.client}>{packet.server}:{packet.direction}", packet.offset
            )
    order = list(range(start.index, len(capture.records)))
    return {"kind": "midstream", "order": order, "first_captured_offset": first_bytes}


DERIVATIONS = {
    "lost": lost,
    "reordered": reordered,
    "duplicated": duplicated,
    "midstream": midstream,
}
