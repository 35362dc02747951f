"""Capture files in, per-connection TCP byte streams out (sans-IO reassembly)."""

from .events import ClientBy, Connection, Direction, StreamSink
from .reader import RecordReader, read_streams
from .reassembly import Reassembler
from .records import CaptureError, iter_records, open_capture
from .stats import CaptureStats

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
