"""Sans-IO decoder of the legacy Kafka 0.7 wire protocol.

``Kafka07Decoder(conn, sink, options)`` implements :class:`pwcap.decode.api.ConnectionDecoder`;
``looks_like_request(data)`` says whether bytes start with a consistent 0.7 request
(protocol detection on any port), ``looks_like_response(data)`` the same for a response;
``find_request_start`` / ``find_response_start`` find the next confirmed frame boundary in
a buffer (captures that begin mid-frame, resynchronisation).
"""

from .sniff import (
    find_request_start,
    find_response_start,
    looks_like_request,
    looks_like_response,
)

__all__ = [
    "Kafka07Decoder",
    "find_request_start",
    "find_response_start",
    "looks_like_request",
    "looks_like_response",
]


def __getattr__(name: str) -> object:
    """``Kafka07Decoder`` is imported on its first use: the registry starts a decoder only
    for a connection of this protocol, and a capture of another never loads it."""
    if name == "Kafka07Decoder":
        from .decoder import Kafka07Decoder

        return Kafka07Decoder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
