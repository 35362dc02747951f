"""Whether bytes are TLS, from their first record header alone: what protocol detection
asks before any state exists. Content decides, never the port."""

from __future__ import annotations

HANDSHAKE = 22
CLIENT_HELLO = 1
# The largest record a peer may send: TLS 1.2 allows 2^14 + 2048 bytes of ciphertext
# (RFC 5246 6.2.3), TLS 1.3 2^14 + 256 (RFC 8446 5.2); a version is known only later.
MAX_RECORD = (1 << 14) + 2048
MAX_RECORD_13 = (1 << 14) + 256


def looks_like_record(data: bytes) -> bool:
    """A TLS record header: change cipher spec, alert, handshake or application data
    (a capture may begin after the handshake), version 3.x, a length TLS allows."""
    return (
        len(data) >= 5
        and 20 <= data[0] <= 23
        and data[1] == 3
        and data[2] <= 4
        and 0 < (data[3] << 8 | data[4]) <= MAX_RECORD
    )


def looks_like_client_hello(data: bytes) -> bool:
    """The first bytes of a client's stream opening a TLS handshake: a handshake record
    of version 3.x whose first message is a ClientHello (its type is the record's sixth
    byte). No Pulsar or Kafka frame starts so: its 4-byte size would be over 350 MB."""
    return (
        looks_like_record(data)
        and data[0] == HANDSHAKE
        and len(data) > 5
        and data[5] == CLIENT_HELLO
    )
