"""A real-broker sample's truth: the client's record, and the frames the capture carries.

There is no broker journal here: the frame counts come from reading the capture back with
dpkt and the Pulsar protobuf schema (tests/corpus/streams.py), which shares no code with
pwcap's capture or framing.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.corpus.streams import command_names, reassemble


def capture_frames(pcap: Path, broker: str) -> dict:
    """Frames per direction and command, and per connection, as the capture carries them."""
    counts: dict[str, Counter[str]] = {"c2b": Counter(), "b2c": Counter()}
    connections: dict[str, dict] = {}
    for (sender, receiver), stream in sorted(reassemble(pcap).items()):
        direction = "b2c" if sender == broker else "c2b"
        client = receiver if direction == "b2c" else sender
        names = command_names(stream)
        counts[direction].update(names)
        row = connections.setdefault(client, {"client": client, "broker": broker})
        row[f"frames_{direction}"] = len(names)
        row[f"bytes_{direction}"] = len(stream)
    return {
        "frames": {direction: dict(sorted(c.items())) for direction, c in counts.items()},
        "frames_total": sum(sum(c.values()) for c in counts.values()),
        "connections": sorted(connections.values(), key=lambda c: c["client"]),
    }


def build_truth(scenario: dict, capture: dict, pcap: Path, broker: str, record: dict) -> dict:
    versions = {k: v for k, v in record.items() if k not in ("sent", "received", "acks", "events")}
    return {
        **scenario,
        "capture": capture,
        **capture_frames(pcap, broker),
        "client": versions,
        "sent": sorted(record["sent"], key=lambda m: (m["topic"], m["sequence_id"])),
        "received": record["received"],
        "acks": record["acks"],
        "events": record["events"],
    }
