"""Sans-IO decoder of the Apache Pulsar binary protocol.

``PulsarDecoder(conn, sink, options)`` implements :class:`pwcap.decode.api.ConnectionDecoder`;
``sniff(data)`` says whether bytes look like the start of a Pulsar frame (protocol
detection on any port), ``contains_frame(data)`` whether a confirmed frame starts anywhere
in them (captures that begin mid-frame); ``find_frame_start`` finds the next confirmed
frame boundary in a buffer (resynchronisation).
"""

from pwcap.decode.pulsar.decoder import PulsarDecoder
from pwcap.decode.pulsar.framing import find_frame_start
from pwcap.decode.pulsar.sniff import contains_frame, looks_like_command, sniff

__all__ = ["PulsarDecoder", "contains_frame", "find_frame_start", "looks_like_command", "sniff"]
