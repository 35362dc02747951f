"""The dataset ``pwcap decode`` writes for every sample capture, read back with DuckDB and
Spark, against the broker's journal and the client's truth.

The decoders are checked frame by frame in tests/test_pulsar_samples.py and
tests/test_kafka07_samples.py with a minimal in-test reader; here the whole product runs:
pwcap's capture reader and reassembly, protocol detection, the decoders, the Parquet
writer. Rows are compared as multisets: the dataset promises rows, not an order.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from fuzz.pcapfile import read_pcap
from pwcap.tables.schema import TABLES, arrow_schema
from tests.corpus.truth import clean_recording
from tests.test_kafka07_samples import message_fields as kafka_fields
from tests.test_kafka07_samples import truth_fields as kafka_truth
from tests.test_pulsar_samples import (
    CLIENT_SAW_LESS,
    delivered,
    message_fields,
    received,
    truth_fields,
)

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"
TRUTHS = {
    capture.name: json.loads(capture.with_suffix(".truth.json").read_text())
    for capture in sorted(SAMPLES.glob("*.pcap*"))
}


def _recorded(prefix: str) -> list[str]:
    """Captures recorded live, whole packets: everything in them must decode."""
    return [
        name
        for name, truth in TRUTHS.items()
        if name.startswith(prefix)
        and "derived_from" not in truth
        and truth["capture"]["snaplen"] >= 65535
        and clean_recording(truth)
    ]


PULSAR = _recorded("pulsar_")
AS_THE_CLIENT_SAW = [c for c in PULSAR if c.split(".")[0] not in CLIENT_SAW_LESS]
KAFKA = _recorded("kafka07_")
DERIVED = [name for name, truth in TRUTHS.items() if "derived_from" in truth]


@pytest.fixture(scope="module")
def db(sample_dataset: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for table in TABLES:
        files = f"{sample_dataset}/{table}/*.parquet"
        con.sql(f"create view {table} as select * from read_parquet('{files}')")
    return con


def rows(db, sql: str, *params) -> list[dict]:
    """Query results as dicts, through Arrow (timestamps stay UTC, maps are key/value lists)."""
    return db.sql(sql, params=list(params)).to_arrow_table().to_pylist()


def frames_by_direction_and_command(db, capture: str, kafka: bool = False) -> dict:
    counted: dict[str, Counter] = defaultdict(Counter)
    for row in rows(
        db,
        "select direction, command, count(*) n from frames where capture = ? group by 1, 2",
        capture,
    ):
        command = row["command"].removesuffix("_RESPONSE") if kafka else row["command"]
        counted[row["direction"]][command] += row["n"]
    return {direction: dict(c) for direction, c in counted.items()}


def conn_ids(db, capture: str) -> dict[str, int]:
    """Our conn_id of each truth connection, found by its client endpoint."""
    found = rows(
        db, "select conn_id, client_ip, client_port from connections where capture = ?", capture
    )
    by_client = {f"{r['client_ip']}:{r['client_port']}": r["conn_id"] for r in found}
    return {c["conn"]: by_client[c["client"]] for c in TRUTHS[capture]["connections"]}


# -- the column contract -------------------------------------------------------------------


@pytest.mark.parametrize("table", TABLES)
def test_every_file_has_the_documented_columns_and_types(sample_dataset, table):
    files = sorted((sample_dataset / table).glob("part-*.parquet"))
    assert files
    for file in files:
        assert pq.read_schema(file) == arrow_schema(table)


def test_duckdb_and_spark_read_the_same_columns_and_rows(sample_dataset, db, spark):
    for table, columns in TABLES.items():
        ours = [c.name for c in columns]
        duck = db.sql(f"select * from {table}").columns
        frame = spark.read.parquet(str(sample_dataset / table))
        assert duck == ours and frame.columns == ours
        ((duck_count,),) = db.sql(f"select count(*) from {table}").fetchall()
        assert frame.count() == duck_count
    spark_counts = {
        (r["capture"], r["direction"], r["command"]): r["count"]
        for r in spark.read.parquet(str(sample_dataset / "frames"))
        .groupBy("capture", "direction", "command")
        .count()
        .collect()
    }
    duck_counts = {
        (r["capture"], r["direction"], r["command"]): r["n"]
        for r in rows(db, "select capture, direction, command, count(*) n from frames group by all")
    }
    assert spark_counts == duck_counts


def test_every_row_names_a_connection_of_its_capture(db):
    for table in ("frames", "messages", "anomalies"):
        orphans = rows(
            db,
            f"select count(*) n from {table} t where conn_id is not null and not exists"
            " (select 1 from connections c where c.conn_id = t.conn_id and c.capture = t.capture)",
        )
        assert orphans == [{"n": 0}], table


@pytest.mark.parametrize("capture", PULSAR + KAFKA)
def test_timestamps_are_the_capture_records_utc_microseconds(db, capture):
    records = read_pcap(SAMPLES / capture).records
    first, last = records[0].ts_us, records[-1].ts_us
    (span,) = rows(
        db,
        "select min(epoch_us(first_ts)) opened, max(epoch_us(last_ts)) closed,"
        " (select min(epoch_us(ts)) from frames where capture = $1) first_frame,"
        " (select max(epoch_us(ts)) from frames where capture = $1) last_frame"
        " from connections where capture = $1",
        capture,
    )
    assert span["opened"] == first  # the SYN is the capture's first record
    assert first < span["first_frame"] <= span["last_frame"] <= span["closed"] <= last


# -- Pulsar: frames, messages, connections -------------------------------------------------


@pytest.mark.parametrize("capture", PULSAR)
def test_pulsar_frames_equal_the_broker_journal_without_anomalies(db, capture):
    assert frames_by_direction_and_command(db, capture) == TRUTHS[capture]["frames"]
    assert rows(db, "select kind from anomalies where capture = ?", capture) == []


@pytest.mark.parametrize("capture", PULSAR)
def test_pulsar_every_checksum_verifies(db, capture):
    checked = rows(
        db,
        "select checksum_ok, count(*) n from frames where capture = ?"
        " and command in ('SEND', 'MESSAGE') group by 1",
        capture,
    )
    assert [r["checksum_ok"] for r in checked] == [True]
    statuses = rows(db, "select distinct checksum_ok from messages where capture = ?", capture)
    assert statuses == [{"checksum_ok": True}]


# A chunked message is one application message: it counts once, on its last chunk.
APPLICATION_MESSAGES = """
    select * from messages where capture = ? and command = ?
    and (num_chunks is null or chunk_id = num_chunks - 1)
"""


@pytest.mark.parametrize("capture", AS_THE_CLIENT_SAW)
def test_pulsar_sent_messages_equal_the_clients_truth(db, capture):
    sent = rows(db, APPLICATION_MESSAGES, capture, "SEND")
    truth = TRUTHS[capture]["sent"]
    assert Counter((m["sequence_id"], message_fields(m)) for m in sent) == Counter(
        (m["sequence_id"], truth_fields(m)) for m in truth
    )


@pytest.mark.parametrize("capture", AS_THE_CLIENT_SAW)
def test_pulsar_delivered_messages_equal_what_the_client_received(db, capture):
    messages = rows(db, APPLICATION_MESSAGES, capture, "MESSAGE")
    assert delivered(messages) == received(TRUTHS[capture]["received"])


@pytest.mark.parametrize("capture", PULSAR)
def test_pulsar_connections_are_one_row_each_with_their_frames(db, capture):
    ids = conn_ids(db, capture)
    for expected in TRUTHS[capture]["connections"]:
        (row,) = rows(
            db,
            "select * from connections where conn_id = ? and capture = ?",
            ids[expected["conn"]],
            capture,
        )
        assert row["protocol"] == "pulsar"
        assert f"{row['server_ip']}:{row['server_port']}" == expected["broker"]
        assert row["frames_c2b"] + row["frames_b2c"] == expected["frames"]
        assert row["client_version"].startswith("Pulsar-") and row["server_version"]
        assert row["client_by"] == "syn" and row["gaps"] == 0 and row["anomalies"] == 0
        assert row["bytes_c2b"] > 0 and row["bytes_b2c"] > 0
    assert len(ids) == len(rows(db, "select 1 from connections where capture = ?", capture))


def test_a_pulsar_capture_on_a_port_nobody_registered_is_found_by_content(db):
    capture = "pulsar_partitioned_port16650.pcap"
    assert TRUTHS[capture]["capture"]["port"] == 16650
    protocols = rows(db, "select distinct protocol from connections where capture = ?", capture)
    assert protocols == [{"protocol": "pulsar"}]


# -- Kafka 0.7 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("capture", KAFKA)
def test_kafka_frames_equal_the_truth_without_anomalies(db, capture):
    truth = TRUTHS[capture]
    assert frames_by_direction_and_command(db, capture, kafka=True) == truth["frames"]
    kinds = rows(db, "select kind from anomalies where capture = ?", capture)
    assert kinds == []


def _kafka_ours(row: dict) -> tuple:
    return (*kafka_fields(row), row["offset"])


def _kafka_theirs(message: dict, ids: dict[int, int], fetched: bool) -> tuple:
    _, *fields = kafka_truth(message)
    return (ids[message["conn"]], *fields, message["offset"] if fetched else None)


@pytest.mark.parametrize("capture", KAFKA)
def test_kafka_messages_equal_the_truth(db, capture):
    truth, ids = TRUTHS[capture], conn_ids(db, capture)
    for direction, key, fetched in (("c2b", "produced", False), ("b2c", "fetched", True)):
        ours = rows(
            db, "select * from messages where capture = ? and direction = ?", capture, direction
        )
        assert Counter(map(_kafka_ours, ours)) == Counter(
            _kafka_theirs(m, ids, fetched) for m in truth[key]
        ), direction


@pytest.mark.parametrize("capture", KAFKA)
def test_kafka_connections_count_requests_and_responses(db, capture):
    ids = conn_ids(db, capture)
    for expected in TRUTHS[capture]["connections"]:
        (row,) = rows(
            db,
            "select protocol, frames_c2b, frames_b2c from connections"
            " where conn_id = ? and capture = ?",
            ids[expected["conn"]],
            capture,
        )
        assert row == {
            "protocol": "kafka07",
            "frames_c2b": expected["requests"],
            "frames_b2c": expected["responses"],
        }


# -- derived captures: loss, duplication, reordering, mid-connection start -------------------


@pytest.mark.parametrize("capture", DERIVED)
def test_derived_captures_decode_and_every_loss_is_an_anomaly(db, capture):
    truth = TRUTHS[capture]
    kind = truth["manifest"]["kind"]
    kafka = capture.startswith("kafka07_")
    found = frames_by_direction_and_command(db, capture, kafka)
    anomalies = Counter(
        r["kind"] for r in rows(db, "select kind from anomalies where capture = ?", capture)
    )
    # Reassembly undoes these, and a pcapng's secrets decrypt its TLS: no loss.
    if kind in ("duplicated", "reordered", "pcapng", "secrets"):
        assert found == truth["frames"]
        assert anomalies == Counter()
        return
    for direction, commands in found.items():  # never more than was sent
        for command, count in commands.items():
            assert count <= truth["frames"][direction][command], (direction, command)
    assert found != truth["frames"]
    if kind == "lost":
        assert anomalies["gap"] == len(truth["manifest"]["missing"])
    if kafka:
        damaged = Counter((d["dir"], d["type"]) for d in truth["manifest"]["damaged_frames"])
        expected = {
            d: {t: n - damaged[(d, t)] for t, n in types.items() if n - damaged[(d, t)]}
            for d, types in truth["frames"].items()
        }
        assert found == expected


def test_a_capture_with_a_short_snaplen_decodes_what_it_can_and_says_what_it_lost(db):
    capture = "pulsar_snaplen96.pcap"
    truth = TRUTHS[capture]
    found = frames_by_direction_and_command(db, capture)
    for direction, commands in found.items():
        for command, count in commands.items():
            assert count <= truth["frames"][direction][command]
    ((gaps,),) = db.sql(
        "select count(*) from anomalies where capture = ? and kind = 'gap'", params=[capture]
    ).fetchall()
    assert gaps > 0
