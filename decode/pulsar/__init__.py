"""Sans-IO decoder of the Apache Pulsar binary protocol.

``PulsarDecoder(conn, sink, options)`` implements :class:`pwcap.decode.api.ConnectionDecoder`;
``sniff(data)`` says whether bytes look like the start of a Pulsar frame (protocol
detection on any port), ``contains_frame(data)`` whether a confirmed frame starts anywhere
in them (captures that begin mid-frame); ``find_frame_start`` finds the next confirmed
frame boundary in a buffer (resynchronisation).
"""

from .framing import find_frame_start
from .sniff import contains_frame, looks_like_command, sniff

__all__ = ["PulsarDecoder", "contains_frame", "find_frame_start", "looks_like_command", "sniff"]


def __getattr__(name: str) -> object:
    """``PulsarDecoder`` is imported on its first use: the registry starts a decoder only
    for a connection of this protocol, and a capture of another never loads it."""
    if name == "PulsarDecoder":
        from .decoder import PulsarDecoder

        return PulsarDecoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
