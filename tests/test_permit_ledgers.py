"""The decoder and the permits job keep one permit ledger, and agree on every delivery.

The permits job (:mod:`pwcap.jobs.permits`) is the reference ledger: its timeline is
what users read, and ``test_jobs_samples`` holds its starvation to the broker's own
record. The decoder keeps the same ledger as it decodes, to report a MESSAGE delivered
beyond the granted permits as a `protocol_violation` anomaly, only where it can be sure
of the balance (a connection seen whole from its SYN, nothing lost since; the module
notes of :mod:`pwcap.decode.pulsar.state` list where the two part at the edges). On such
connections, in every sample and in captures whose consumers overrun their permits, the
deliveries the decoder reports are exactly those the job counts beyond the permits, at the
same balance.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.decode.driver import decode_captures
from pwcap.decode.pulsar._pb import pulsar_api_pb2 as pb
from pwcap.jobs import permits
from tests.pulsar_frames import batch, command, entry_bytes, frame

BEYOND = re.compile(r"MESSAGE delivered with (-?\d+) permits left for consumer (\d+)\Z")
C2B, B2C = 0, 1
PORT = 6650

Delivery = tuple[str, int, int]  # capture, connection, stream offset of the MESSAGE frame


def subscribe(consumer: int, request: int) -> list[tuple[int, bytes]]:
    """A SUBSCRIBE and the broker's SUCCESS."""
    asked = command(
        "SUBSCRIBE",
        topic="persistent://t/n/ledger",
        subscription="s",
        subType=pb.CommandSubscribe.Shared,
        consumer_id=consumer,
        request_id=request,
    )
    return [(C2B, frame(asked)), (B2C, frame(command("SUCCESS", request_id=request)))]


def flow(consumer: int, granted: int) -> tuple[int, bytes]:
    return C2B, frame(command("FLOW", consumer_id=consumer, messagePermits=granted))


def delivery(consumer: int, entry: int, messages: int) -> tuple[int, bytes]:
    """A MESSAGE carrying an entry of ``messages`` messages (a batch when more than one)."""
    metadata = pb.MessageMetadata(producer_name="p", sequence_id=entry, publish_time=1)
    if messages > 1:
        metadata.num_messages_in_batch = messages
        payload = batch([(pb.SingleMessageMetadata(), b"m") for _ in range(messages)])
    else:
        payload = b"m"
    message = command("MESSAGE", consumer_id=consumer, message_id={"ledgerId": 1, "entryId": entry})
    return B2C, frame(message, entry_bytes(metadata, payload))


def overrun() -> list[tuple[int, bytes]]:
    """Two consumers that receive more than they were granted, one subscribing again."""
    return [
        *subscribe(1, 1),
        flow(1, 3),  # 3
        delivery(1, 1, 2),  # 3 -> 1
        delivery(1, 2, 2),  # 1 -> -1: a batch overshoots, as brokers dispatch whole ones
        delivery(1, 3, 1),  # beyond, at -1
        flow(1, 4),  # -> 2
        delivery(1, 4, 1),  # 2 -> 1
        delivery(1, 5, 3),  # 1 -> -2
        delivery(1, 6, 1),  # beyond, at -2
        *subscribe(2, 2),
        delivery(2, 7, 1),  # beyond, at 0: no FLOW yet
        flow(2, 2),  # -> 1
        delivery(2, 8, 1),  # 1 -> 0
        *subscribe(1, 3),  # a new life: the balance starts at zero again
        delivery(1, 9, 1),  # beyond, at 0
    ]


def decoder_verdicts(dataset: Path, sure: set[tuple[str, int]]) -> dict[Delivery, tuple]:
    """The deliveries the decoder reported beyond the permits, on the connections where
    it is sure of the balance: (consumer, balance before)."""
    found = {}
    for row in pq.read_table(dataset / "anomalies").to_pylist():
        matched = BEYOND.match(row["detail"] or "")
        connection = (row["capture"], row["conn_id"])
        if row["kind"] == "protocol_violation" and matched and connection in sure:
            found[(*connection, row["stream_offset"])] = (int(matched[2]), int(matched[1]))
    return found


def job_verdicts(spark, dataset: Path, sure: set[tuple[str, int]]) -> dict[Delivery, tuple]:
    """The deliveries the permits job counts beyond the permits, on the connections where
    the decoder is sure of the balance: (consumer, balance before)."""
    frames = spark.read.parquet(str(dataset / "frames"))
    beyond = permits.permit_timeline(frames).where("event = 'delivery' and balance_before <= 0")
    return {
        (r.capture, r.conn_id, r.stream_offset): (r.consumer_id, r.balance_before)
        for r in beyond.collect()
        if (r.capture, r.conn_id) in sure
    }


def sure_connections(dataset: Path) -> set[tuple[str, int]]:
    """Connections the decoder saw from their SYN with nothing lost: where it keeps a
    balance for every consumer it sees subscribe."""
    lost = {
        (a["capture"], a["conn_id"])
        for a in pq.read_table(dataset / "anomalies").to_pylist()
        if a["kind"] in ("gap", "resync")
    }
    return {
        (c["capture"], c["conn_id"])
        for c in pq.read_table(dataset / "connections").to_pylist()
        if c["protocol"] == "pulsar" and c["client_by"] == "syn" and not c["gaps"]
    } - lost


@pytest.fixture(scope="module")
def overrun_dataset(tmp_path_factory, write_capture) -> Path:
    folder = tmp_path_factory.mktemp("overrun")
    capture = write_capture(folder / "overrun.pcap", [(PORT, overrun())])
    decode_captures([capture], folder / "dataset")
    return folder / "dataset"


def test_both_ledgers_find_the_same_deliveries_beyond_the_permits(spark, overrun_dataset):
    sure = sure_connections(overrun_dataset)
    decoder = decoder_verdicts(overrun_dataset, sure)
    assert len(decoder) == 4  # the test is only as good as the overruns it holds
    assert decoder == job_verdicts(spark, overrun_dataset, sure)


def test_both_ledgers_agree_on_every_sample(spark, sample_dataset):
    sure = sure_connections(sample_dataset)
    assert sure  # most samples are captured from the handshake on
    assert decoder_verdicts(sample_dataset, sure) == job_verdicts(spark, sample_dataset, sure)
