# Python 2.7 only: samsa 0.3.11 (a Kafka 0.7 client) is Python 2 code.
# ruff: noqa: UP010, UP031
"""Drive samsa's protocol client through MULTIPRODUCE / MULTIFETCH across topics.

    python2.7 samsa_multi.py HOST PORT

franz-kafka sends neither multi request; samsa's ``Client`` sends both, and writes
magic-0 messages by default (magic 1 when asked). Prints one JSON object per line with
what the application sent and got back, for the corpus truth files.
"""

from __future__ import print_function

import hashlib
import json
import sys

from samsa.client import OFFSET_EARLIEST, OFFSET_LATEST, Client
from samsa.handlers import ThreadingHandler

TOPICS = {"clicks": 3, "views": 2}


def record(**event):
    print(json.dumps(event, sort_keys=True))
    sys.stdout.flush()


def digest(payload):
    return hashlib.sha256(payload).hexdigest()


def payloads(topic, partition, first, count, size):
    text = "%s/%d#" % (topic, partition)
    return [(text + str(first + i) + " ") * (size // len(text)) for i in range(count)]


def multiproduce(client, data, version):
    client.multiproduce(data, version=version)
    for topic, partition, messages in data:
        record(
            event="produce",
            request="MULTIPRODUCE",
            topic=topic,
            partition=partition,
            magic=version,
            messages=[{"size": len(m), "sha256": digest(m)} for m in messages],
        )


def received(messages):
    return [
        {
            "offset": m.offset,
            "size": len(m.payload),
            "sha256": digest(bytes(m.payload)),
            "crc_ok": m.valid,
            "magic": m["magic"],
        }
        for m in messages
    ]


def multifetch(client, parts):
    """Each part's messages, or the error samsa raises when it reaches that part."""
    results = client.multifetch(parts)
    for topic, partition, offset, size in parts:
        event = {"event": "fetch", "request": "MULTIFETCH", "topic": topic}
        event.update(partition=partition, offset=offset, max_size=size)
        try:
            event.update(error=None, messages=received(list(next(results))))
        except Exception as error:  # samsa stops the whole response at an error part
            event.update(error=type(error).__name__, messages=[])
            record(**event)
            return
        record(**event)


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    client = Client(host, ThreadingHandler(), port=port)
    multiproduce(
        client,
        [
            (t, p, payloads(t, p, 0, 3 + p, 40 + 30 * p))
            for t, n in sorted(TOPICS.items())
            for p in range(n)
        ],
        version=0,
    )
    multiproduce(
        client,
        [
            ("clicks", 1, payloads("clicks", 1, 10, 4, 120)),
            ("views", 0, payloads("views", 0, 10, 2, 60)),
        ],
        version=1,
    )
    client.produce("clicks", 2, payloads("clicks", 2, 20, 2, 50), version=1)
    record(
        event="produce",
        request="PRODUCE",
        topic="clicks",
        partition=2,
        magic=1,
        messages=[{"size": len(m), "sha256": digest(m)} for m in payloads("clicks", 2, 20, 2, 50)],
    )
    everything = [(t, p, 0, 1 << 20) for t, n in sorted(TOPICS.items()) for p in range(n)]
    multifetch(client, everything)
    multifetch(client, [(t, p, 0, 150) for t, n in sorted(TOPICS.items()) for p in range(n)])
    multifetch(client, [("views", 1, 0, 4096), ("clicks", 0, 123456, 4096), ("views", 0, 0, 4096)])
    for topic, partition in (("clicks", 1), ("views", 1)):
        for when in (OFFSET_LATEST, OFFSET_EARLIEST):
            offsets = client.offsets(topic, partition, when, 5)
            record(
                event="offsets",
                topic=topic,
                partition=partition,
                time=when,
                max_offsets=5,
                offsets=offsets,
            )
    messages = client.fetch("clicks", 1, 0, 1 << 20)
    record(
        event="fetch",
        request="FETCH",
        topic="clicks",
        partition=1,
        offset=0,
        max_size=1 << 20,
        error=None,
        messages=received(messages),
    )
    client.disconnect()


if __name__ == "__main__":
    main()
