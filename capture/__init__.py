"""Capture files in, per-connection TCP byte streams out (sans-IO reassembly)."""

from pwcap.capture.events import ClientBy, Connection, Direction, StreamSink
from pwcap.capture.reader import RecordReader, read_streams
from pwcap.capture.reassembly import Reassembler
from pwcap.capture.records import CaptureError, iter_records, open_capture
from pwcap.capture.stats import CaptureStats

__all__ = [
    "CaptureError",
    "CaptureStats",
    "ClientBy",
    "Connection",
    "Direction",
    "Reassembler",
    "RecordReader",
    "StreamSink",
    "iter_records",
    "open_capture",
    "read_streams",
]
