"""A hand-built 0.7 client, for the one thing no real client here sends: framed snappy.

    python -m tests.kafka07.handbuilt HOST PORT

The 0.7 Java producer wraps a snappy message set in xerial's ``SnappyOutputStream``
(magic, two int32 versions, then ``[int32 length][raw snappy]`` blocks of at most 32 KiB
of input); franz-kafka and samsa cannot write it (franz-kafka writes raw snappy, samsa
no compression), and the Java client cannot be installed here. This script is ours, and
the truth file says so. It prints the same JSON events as the real-client scripts.
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import sys

import cramjam

from tests.kafka07 import protocol as p
from tests.kafka07.messages import XERIAL_MAGIC, read_message_set

XERIAL_VERSIONS = struct.pack(">ii", 1, 1)
XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size
FETCH_SIZE = 300 * 1024  # the 0.7 consumer's default fetch.size


def xerial_frame(data: bytes) -> bytes:
    blocks = []
    for start in range(0, len(data), XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK]))
        blocks.append(struct.pack(">i", len(block)) + block)
    return XERIAL_MAGIC + XERIAL_VERSIONS + b"".join(blocks)


def payloads(first: int, count: int, size: int) -> list[bytes]:
    return [(f"framed#{first + i} " * size).encode()[:size] for i in range(count)]


def record(**event: object) -> None:
    print(json.dumps(event, sort_keys=True), flush=True)


def digests(messages: list[bytes]) -> list[dict[str, object]]:
    return [{"size": len(m), "sha256": hashlib.sha256(m).hexdigest()} for m in messages]


class HandClient:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)

    def produce_framed(self, topic: str, partition: int, messages: list[bytes]) -> None:
        inner = b"".join(p.encode_message(m) for m in messages)
        wrapper = p.encode_message(xerial_frame(inner), codec=2)
        request = p.Request(p.PRODUCE, [p.Produce(topic, partition, wrapper)])
        self.sock.sendall(p.encode_request(request))
        record(
            event="produce",
            topic=topic,
            partition=partition,
            compression="snappy-framed",
            messages=digests(messages),
        )

    def fetch(self, topic: str, partition: int, offset: int) -> int:
        request = p.Request(p.FETCH, [p.Fetch(topic, partition, offset, FETCH_SIZE)])
        self.sock.sendall(p.encode_request(request))
        body = p.receive_response(self.sock)
        (error,) = struct.unpack_from(">h", body)
        walked = read_message_set(body[2:], offset)
        record(
            event="fetch",
            topic=topic,
            partition=partition,
            offset=offset,
            max_size=FETCH_SIZE,
            error=None if error == p.NO_ERROR else p.ERROR_NAMES[error],
            messages=[{"size": m.payload_size, "sha256": m.sha256} for m in walked.messages],
        )
        return offset + walked.valid_bytes


def main() -> None:
    client = HandClient(sys.argv[1], int(sys.argv[2]))
    client.produce_framed("framed", 0, payloads(0, 5, 200))
    client.produce_framed("framed", 0, payloads(5, 30, 1500))  # two xerial blocks
    offset = 0
    while (next_offset := client.fetch("framed", 0, offset)) != offset:
        offset = next_offset
    client.sock.close()


if __name__ == "__main__":
    main()
