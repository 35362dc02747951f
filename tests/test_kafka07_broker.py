"""The Kafka 0.7 test broker: each request type over a raw socket, as 0.7 answers it, and
the real 0.7 clients (franz-kafka, samsa) round-tripping through it."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import cramjam
import pytest

from tests.kafka07 import protocol as p
from tests.kafka07.broker import Broker, BrokerConfig
from tests.kafka07.handbuilt import xerial_frame
from tests.kafka07.messages import read_message_set
from tests.kafka07.regenerate import client_command, install_franz, install_samsa, python27
from tests.kafka07.scenarios import CLIENT_DIR, SCENARIOS


@contextmanager
def running_broker(journal: Path, **partitions: int) -> Iterator[int]:
    """The broker in a background event loop on an ephemeral port; yields the port."""
    loop = asyncio.new_event_loop()
    broker = Broker(BrokerConfig(port=0, partitions=partitions, journal=journal))
    loop.run_until_complete(broker.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield broker.port
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


class RawClient:
    """Writes requests with the 0.7 layout and reads ``[length][error][body]`` responses."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, request_type: int, *parts: p.Part) -> None:
        self.sock.sendall(p.encode_request(p.Request(request_type, list(parts))))

    def receive(self) -> tuple[int, bytes]:
        body = p.receive_response(self.sock)
        return struct.unpack_from(">h", body)[0], body[2:]

    def closed_by_broker(self) -> bool:
        return self.sock.recv(1) == b""

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    return tmp_path / "broker.jsonl"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def message_set(*payloads: bytes) -> bytes:
    return b"".join(p.encode_message(payload) for payload in payloads)


def produce_and_fetch(port: int, messages: bytes, max_size: int = 1 << 20) -> tuple[int, bytes]:
    client = RawClient(port)
    client.send(p.PRODUCE, p.Produce("t", 0, messages))
    client.send(p.FETCH, p.Fetch("t", 0, 0, max_size))
    response = client.receive()
    client.close()
    return response


def test_produce_gets_no_response_and_fetch_returns_the_bytes_as_sent(journal: Path) -> None:
    produced = message_set(b"one", b"two", b"three")
    with running_broker(journal) as port:
        error, body = produce_and_fetch(port, produced)
    assert (error, body) == (p.NO_ERROR, produced)
    produce, request, response = rows(journal)
    assert [r["dir"] for r in (produce, request, response)] == ["c2b", "c2b", "b2c"]
    assert [m["sha256"] for m in response["parts"][0]["messages"]] == [
        hashlib.sha256(payload).hexdigest() for payload in (b"one", b"two", b"three")
    ]
    assert [m["offset"] for m in produce["parts"][0]["messages"]] == [0, 13, 26]
    assert response["parts"][0]["messages"] == produce["parts"][0]["messages"]


def test_a_fetch_cut_at_max_size_ends_in_a_partial_message(journal: Path) -> None:
    produced = message_set(b"a" * 40, b"b" * 40)
    with running_broker(journal) as port:
        error, body = produce_and_fetch(port, produced, max_size=70)
    assert (error, body) == (p.NO_ERROR, produced[:70])
    part = rows(journal)[-1]["parts"][0]
    assert (part["outer_messages"], part["truncated_tail"]) == (1, 70 - 50)


def test_compressed_messages_are_stored_whole_and_journalled_expanded(journal: Path) -> None:
    inner = message_set(b"x", b"y")
    wrapped = p.encode_message(gzip.compress(inner), codec=1)
    wrapped += p.encode_message(bytes(cramjam.snappy.compress_raw(inner)), codec=2)
    with running_broker(journal) as port:
        assert produce_and_fetch(port, wrapped) == (p.NO_ERROR, wrapped)
    messages = rows(journal)[-1]["parts"][0]["messages"]
    assert [(m["compression"], m["inner_index"], m["crc_ok"]) for m in messages] == [
        ("GZIP", 0, True),
        ("GZIP", 1, True),
        ("SNAPPY", 0, True),
        ("SNAPPY", 1, True),
    ]
    second_wrapper_offset = len(p.encode_message(gzip.compress(inner), codec=1))
    assert [m["offset"] for m in messages] == [0, 0, second_wrapper_offset, second_wrapper_offset]


def test_multiproduce_and_multifetch_work_part_by_part(journal: Path) -> None:
    with running_broker(journal, a=2) as port:
        client = RawClient(port)
        client.send(
            p.MULTIPRODUCE,
            p.Produce("a", 0, message_set(b"a0")),
            p.Produce("a", 1, message_set(b"a1", b"a1+")),
            p.Produce("b", 0, message_set(b"b0")),
        )
        client.send(
            p.MULTIFETCH,
            p.Fetch("a", 1, 0, 100),
            p.Fetch("b", 0, 0, 100),
            p.Fetch("b", 0, 999, 100),
        )
        error, body = client.receive()
        client.close()
    assert error == p.NO_ERROR
    answered = []
    while body:
        size, part_error = struct.unpack_from(">ih", body)
        answered.append((part_error, body[6 : 4 + size]))
        body = body[4 + size :]
    assert answered == [
        (p.NO_ERROR, message_set(b"a1", b"a1+")),
        (p.NO_ERROR, message_set(b"b0")),
        (p.OFFSET_OUT_OF_RANGE, b""),
    ]
    multiproduce, multifetch, response = rows(journal)
    assert [len(r["parts"]) for r in (multiproduce, multifetch, response)] == [3, 3, 3]
    assert [part["error"] for part in response["parts"]] == [0, 0, 1]


def test_offsets_answer_latest_then_earliest_as_0_7_does(journal: Path) -> None:
    produced = message_set(b"one", b"two")
    with running_broker(journal) as port:
        client = RawClient(port)
        client.send(p.OFFSETS, p.Offsets("t", 0, p.LATEST_TIME, 10))
        empty_topic = client.receive()
        client.send(p.PRODUCE, p.Produce("t", 0, produced))
        answers = []
        for when in (p.LATEST_TIME, p.EARLIEST_TIME):
            client.send(p.OFFSETS, p.Offsets("t", 0, when, 10))
            answers.append(client.receive())
        client.close()

    def offsets(body: bytes) -> list[int]:
        (count,) = struct.unpack_from(">i", body)
        return list(struct.unpack_from(f">{count}q", body, 4))

    assert offsets(empty_topic[1]) == [0]
    assert [offsets(body) for _, body in answers] == [[len(produced), 0], [0]]


def test_fetch_errors_are_answered_with_0_7_codes(journal: Path) -> None:
    with running_broker(journal) as port:
        client = RawClient(port)
        client.send(p.PRODUCE, p.Produce("t", 0, message_set(b"x")))
        client.send(p.FETCH, p.Fetch("t", 0, 500, 100))
        client.send(p.FETCH, p.Fetch("t", 7, 0, 100))
        client.send(p.FETCH, p.Fetch("never-produced", 0, 0, 100))
        answers = [client.receive() for _ in range(3)]
        client.close()
    assert answers == [(p.OFFSET_OUT_OF_RANGE, b""), (p.WRONG_PARTITION, b""), (p.NO_ERROR, b"")]


@pytest.mark.parametrize(
    "request_type, part",
    [
        (p.PRODUCE, p.Produce("t", 3, message_set(b"x"))),
        (p.OFFSETS, p.Offsets("t", 3, p.LATEST_TIME, 1)),
    ],
)
def test_a_wrong_partition_outside_fetch_closes_the_connection(
    journal: Path, request_type: int, part: p.Part
) -> None:
    with running_broker(journal) as port:
        client = RawClient(port)
        client.send(request_type, part)
        assert client.closed_by_broker()
        client.close()
    request, close = rows(journal)
    assert (request["dir"], close["dir"]) == ("c2b", "close")
    assert "InvalidPartition" in close["reason"]


def test_a_produced_message_with_a_bad_crc_is_not_stored(journal: Path) -> None:
    good = p.encode_message(b"fine")
    bad = bytearray(p.encode_message(b"flipped"))
    bad[-1] ^= 0xFF
    with running_broker(journal) as port:
        client = RawClient(port)
        client.send(p.PRODUCE, p.Produce("t", 0, good + bytes(bad)))
        assert client.closed_by_broker()
        client.close()
        # only the second connection's message is in the log
        assert produce_and_fetch(port, good) == (p.NO_ERROR, good)
    crc_results = [m["crc_ok"] for m in rows(journal)[0]["parts"][0]["messages"]]
    assert crc_results == [True, False]


def test_the_java_clients_framed_snappy_expands_like_raw_snappy() -> None:
    inner = message_set(*(bytes([65 + i]) * 20_000 for i in range(3)))  # 60 kB: two blocks
    framed = p.encode_message(xerial_frame(inner), codec=2)
    raw = p.encode_message(bytes(cramjam.snappy.compress_raw(inner)), codec=2)
    walked_framed = read_message_set(framed, 0).messages
    walked_raw = read_message_set(raw, 0).messages
    assert [m.sha256 for m in walked_framed] == [m.sha256 for m in walked_raw]
    assert len(walked_framed) == 3


def test_the_walk_places_messages_at_log_offsets_and_measures_the_tail() -> None:
    produced = message_set(b"p" * 10, b"q" * 20)
    walked = read_message_set(produced[:-3], base_offset=100)
    assert [m.offset for m in walked.messages] == [100]
    assert walked.truncated_tail == len(p.encode_message(b"q" * 20)) - 3


# The real 0.7 clients against the broker. They are not committed (node_modules, the
# samsa target folder); the first test that needs one installs it from its registry
# with the regenerate step's own installer, or skips saying why it cannot.


@pytest.fixture(scope="module")
def franz_installed() -> None:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node / npm not installed: franz-kafka cannot run")
    if not (CLIENT_DIR / "node_modules" / "franz-kafka").is_dir():
        try:
            install_franz()
        except subprocess.CalledProcessError as error:
            pytest.skip(f"npm ci failed: {error}")


@pytest.fixture(scope="module")
def samsa_installed() -> None:
    try:
        python27()
        install_samsa()
    except (RuntimeError, subprocess.CalledProcessError) as error:
        pytest.skip(f"samsa cannot run here: {error}")


def run_real_client(name: str, journal: Path) -> tuple[list[dict], list[dict]]:
    """Run a corpus scenario's real client against an in-process broker: (events, rows)."""
    scenario = next(s for s in SCENARIOS if s.name == name)
    with running_broker(journal, **scenario.partitions) as port:
        command, env, cwd = client_command(scenario, port)
        run = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=True
        )
    events = [json.loads(line) for line in run.stdout.splitlines()]
    return events, rows(journal)


def sent_and_stored(events: list[dict], journal: list[dict]) -> tuple[list, list]:
    sent = [
        (e["topic"], e["partition"], m["sha256"])
        for e in events
        if e["event"] == "produce"
        for m in e["messages"]
    ]
    stored = [
        (part["topic"], part["partition"], m["sha256"])
        for row in journal
        if row["dir"] == "c2b" and row["type"] in ("PRODUCE", "MULTIPRODUCE")
        for part in row["parts"]
        for m in part["messages"]
    ]
    return sent, stored


def got_and_returned(events: list[dict], journal: list[dict]) -> tuple[list, list]:
    got = [m["sha256"] for e in events if e["event"] == "fetch" for m in e["messages"]]
    returned = [
        m["sha256"]
        for row in journal
        if row["dir"] == "b2c" and row["type"] in ("FETCH", "MULTIFETCH")
        for part in row["parts"]
        for m in part["messages"]
    ]
    return got, returned


@pytest.mark.usefixtures("franz_installed")
def test_franz_kafka_gets_back_the_gzip_batches_it_produced(journal: Path) -> None:
    events, journal_rows = run_real_client("kafka07_gzip", journal)
    sent, stored = sent_and_stored(events, journal_rows)
    assert sent == stored and len(sent) == 17
    got, returned = got_and_returned(events, journal_rows)
    assert got == returned and sorted(got) == sorted(digest for *_, digest in sent)
    messages = [
        m for row in journal_rows if row["dir"] == "b2c" for m in row["parts"][0]["messages"]
    ]
    assert {m["compression"] for m in messages} == {"GZIP"}


@pytest.mark.usefixtures("franz_installed")
def test_franz_kafka_sees_0_7_errors_and_closed_connections(journal: Path) -> None:
    events, journal_rows = run_real_client("kafka07_errors", journal)
    errors = [e["error"] for e in events if e["event"] == "fetch" and e["error"]]
    assert errors == ["OffsetOutOfRange", "WrongPartition"]
    assert [e["event"] for e in events].count("closed_by_broker") == 2
    assert [r["dir"] for r in journal_rows].count("close") == 2


@pytest.mark.usefixtures("samsa_installed")
def test_samsa_multiproduce_and_multifetch_round_trip(journal: Path) -> None:
    events, journal_rows = run_real_client("kafka07_multi", journal)
    sent, stored = sent_and_stored(events, journal_rows)
    assert sent == stored
    requests = {r["type"] for r in journal_rows if r["dir"] == "c2b"}
    assert {"MULTIPRODUCE", "MULTIFETCH"} <= requests
    got, returned = got_and_returned(events, journal_rows)
    assert set(got) <= set(returned) and set(returned) <= {digest for *_, digest in sent}
