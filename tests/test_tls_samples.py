"""TLS samples (tests/corpus/tls.py: real TLS stacks, the broker's journal as the truth)
decoded with their key logs, without them, with wrong ones, and cut after the handshake.

The decrypted traffic must give exactly the frames and messages the journal and the
client recorded; the ``tls_*`` columns must say what OpenSSL told the broker it
negotiated (its cipher names turned into IANA names by ``openssl ciphers -stdname``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from pwcap.cli import main as pwcap_main
from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import Summary, decode_captures
from tests.conftest import SAMPLES
from tests.test_decode_samples import (
    APPLICATION_MESSAGES,
    TRUTHS,
    frames_by_direction_and_command,
    rows,
)
from tests.test_pulsar_samples import delivered, message_fields, received, truth_fields

RECORDED = sorted(n for n, t in TRUTHS.items() if "tls" in t and "derived_from" not in t)
DECRYPTABLE = [*RECORDED, "tls13_derived_secrets.pcapng"]
OFFICIAL_CLIENT = [n for n in RECORDED if TRUTHS[n]["sent"]]
VERSIONS = {"TLSv1.2": "TLS 1.2", "TLSv1.3": "TLS 1.3"}


@pytest.fixture(scope="module")
def db(sample_dataset: Path) -> duckdb.DuckDBPyConnection:
    """The sample dataset (decoded with every sample's key log)."""
    return views(sample_dataset)


def keylog(capture: str) -> Path:
    return SAMPLES / f"{Path(capture).stem}.keylog"


def decode(
    tmp_path: Path, captures: list[str], keylogs: list[Path]
) -> tuple[duckdb.DuckDBPyConnection, Summary]:
    """Captures decoded into a dataset of their own, read back with DuckDB."""
    out = tmp_path / "out"
    options = DecodeOptions(tls_keylogs=tuple(str(k) for k in keylogs))
    summary = decode_captures([SAMPLES / c for c in captures], out, options)
    return views(out), summary


def views(dataset: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    for table in ("frames", "messages", "connections", "anomalies"):
        con.sql(f"create view {table} as select * from read_parquet('{dataset}/{table}/*.parquet')")
    return con


def journal(capture: str) -> list[dict]:
    path = SAMPLES / f"{TRUTHS[capture].get('derived_from', Path(capture).stem)}.broker.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def iana_names() -> dict[str, str]:
    """OpenSSL's cipher names -> IANA's, as ``openssl ciphers -stdname`` lists them."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: no witness of the IANA cipher names")
    listed = subprocess.run(
        ["openssl", "ciphers", "-stdname", "ALL:@SECLEVEL=0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {}
    for line in listed.splitlines():
        standard, _, openssl, *_ = line.split()
        names[openssl] = standard
    return names


# -- decrypted: the broker's truth ---------------------------------------------------------


@pytest.mark.parametrize("capture", DECRYPTABLE)
def test_decrypted_frames_equal_the_broker_journal_without_anomalies(db, capture):
    assert frames_by_direction_and_command(db, capture) == TRUTHS[capture]["frames"]
    assert rows(db, "select kind, detail from anomalies where capture = ?", capture) == []


@pytest.mark.parametrize("capture", DECRYPTABLE)
def test_every_decrypted_frame_is_the_journals_in_order(db, capture):
    """Per connection and direction, the frames in stream order are the ones the broker
    read and wrote, in its order: command, size and every id it logged."""
    ours: dict[tuple, list] = defaultdict(list)
    for row in rows(
        db,
        "select f.*, c.client_ip || ':' || c.client_port as client from frames f"
        " join connections c using (capture, conn_id) where capture = ?"
        " order by conn_id, direction, stream_offset",
        capture,
    ):
        ours[(row["client"], row["direction"])].append(row)
    theirs: dict[tuple, list] = defaultdict(list)
    for line in journal(capture):
        theirs[(line["client"], line["dir"])].append(line)
    assert ours.keys() == theirs.keys()
    for key, lines in theirs.items():
        assert len(ours[key]) == len(lines), key
        for row, line in zip(ours[key], lines, strict=True):
            assert (row["command"], row["frame_size"]) == (line["cmd"], line["frame_size"])
            for field in ("request_id", "producer_id", "consumer_id", "sequence_id"):
                if field in line:
                    assert row[field] == line[field], (key, line["cmd"], field)


@pytest.mark.parametrize("capture", OFFICIAL_CLIENT)
def test_decrypted_messages_equal_what_the_client_sent_and_received(db, capture):
    truth = TRUTHS[capture]
    sent = rows(db, APPLICATION_MESSAGES, capture, "SEND")
    assert Counter((m["sequence_id"], message_fields(m)) for m in sent) == Counter(
        (m["sequence_id"], truth_fields(m)) for m in truth["sent"]
    )
    assert delivered(rows(db, APPLICATION_MESSAGES, capture, "MESSAGE")) == received(
        truth["received"]
    )


@pytest.mark.parametrize("capture", DECRYPTABLE)
def test_the_tls_columns_say_what_openssl_negotiated(db, capture):
    names = iana_names()
    connections = {
        f"{r['client_ip']}:{r['client_port']}": r
        for r in rows(db, "select * from connections where capture = ?", capture)
    }
    sessions = TRUTHS[capture]["tls"]
    assert len(connections) == len(sessions)
    for session in sessions:
        row = connections[session["client"]]
        assert row["protocol"] == "pulsar"
        assert (row["tls_status"], row["tls_decrypted"]) == ("decrypted", True)
        assert row["tls_version"] == VERSIONS[session["version"]]
        assert row["tls_cipher"] == names[session["cipher"]]
        assert row["tls_client_cert"] is session["client_cert"]
        assert row["tls_resumed"] is session["resumed"]
        assert row["tls_sni"] == "localhost"  # the clients' service URL names it
        assert row["frames_c2b"] > 0 and row["frames_b2c"] > 0


def test_plaintext_connections_have_no_tls_columns(db):
    plain = rows(
        db,
        "select count(*) n from connections where capture like 'pulsar_%' and (tls_version is not"
        " null or tls_status is not null or tls_decrypted is not null or tls_sni is not null)",
    )
    assert plain == [{"n": 0}]


# -- not decrypted: said, with what the handshake shows --------------------------------------


def test_without_keys_each_connection_is_reported_with_its_version_and_sni(tmp_path):
    names = iana_names()
    con, summary = decode(tmp_path, RECORDED, [])
    for capture in RECORDED:
        found = rows(con, "select * from connections where capture = ?", capture)
        by_client = {f"{r['client_ip']}:{r['client_port']}": r for r in found}
        for session in TRUTHS[capture]["tls"]:
            row = by_client[session["client"]]
            assert (row["protocol"], row["tls_status"], row["tls_decrypted"]) == (
                "tls",
                "no_keys",
                False,
            )
            assert row["tls_version"] == VERSIONS[session["version"]]
            assert row["tls_cipher"] == names[session["cipher"]]
            assert row["tls_sni"] == "localhost"
            # TLS 1.2 shows the client's certificate; TLS 1.3 encrypts it
            expected = session["client_cert"] if session["version"] == "TLSv1.2" else None
            assert row["tls_client_cert"] is expected
            assert row["frames_c2b"] == row["frames_b2c"] == 0
        anomalies = rows(
            con, "select conn_id, kind, detail from anomalies where capture = ?", capture
        )
        assert Counter(a["kind"] for a in anomalies) == {"tls_no_keys": len(found)}
        assert {a["conn_id"] for a in anomalies} == {r["conn_id"] for r in found}
        for anomaly in anomalies:
            assert "SNI localhost" in anomaly["detail"] and "TLS 1." in anomaly["detail"]
    assert rows(con, "select count(*) n from frames") == [{"n": 0}]
    assert summary.tls == {"no_keys": sum(len(TRUTHS[c]["tls"]) for c in RECORDED)}


def test_a_wrong_key_log_decrypts_nothing_and_says_so(tmp_path):
    con, summary = decode(
        tmp_path, ["tls13_aes_gcm.pcap"], [SAMPLES / "tls13_aes_gcm.wrong.keylog"]
    )
    (row,) = rows(con, "select * from connections")
    assert (row["protocol"], row["tls_status"], row["tls_decrypted"]) == (
        "tls",
        "wrong_keys",
        False,
    )
    anomalies = rows(con, "select direction, kind from anomalies order by direction")
    assert anomalies == [
        {"direction": "b2c", "kind": "tls_auth_failed"},
        {"direction": "c2b", "kind": "tls_auth_failed"},
    ]
    assert rows(con, "select count(*) n from frames") == [{"n": 0}]
    assert summary.tls == {"wrong_keys": 1}


def test_a_capture_that_begins_after_the_handshake_says_the_handshake_is_missing(tmp_path):
    capture = "tls13_derived_midstream.pcap"
    con, _ = decode(tmp_path, [capture], [keylog("tls13_aes_gcm.pcap")])
    (row,) = rows(con, "select * from connections")
    assert (row["protocol"], row["tls_status"]) == ("tls", "handshake_missing")
    assert row["tls_version"] is None and row["tls_sni"] is None
    assert [a["kind"] for a in rows(con, "select kind from anomalies")] == ["tls_handshake_missing"]
    assert rows(con, "select count(*) n from frames") == [{"n": 0}]


@pytest.mark.parametrize("capture", ["tls12_ccm_resumed_id.pcap", "tls12_resumed_ticket.pcap"])
def test_tls12_sessions_resumed_by_id_or_ticket_decrypt_with_the_first_sessions_secret(
    tmp_path, capture
):
    """Only the full handshake's line is kept: the resumed sessions' master secret comes
    from the session the capture decrypted first (found by session id or ticket)."""
    lines = [
        line
        for line in keylog(capture).read_text().splitlines()
        if line.startswith("CLIENT_RANDOM")
    ]
    first = tmp_path / "first.keylog"
    first.write_text(lines[0] + "\n")
    con, _ = decode(tmp_path, [capture], [first])
    assert frames_by_direction_and_command(con, capture) == TRUTHS[capture]["frames"]
    resumed = rows(con, "select tls_resumed, tls_status from connections order by first_ts")
    assert resumed == [{"tls_resumed": r, "tls_status": "decrypted"} for r in (False, True, True)]


def test_the_secrets_a_pcapng_embeds_need_no_key_log(tmp_path):
    capture = "tls13_derived_secrets.pcapng"
    con, summary = decode(tmp_path, [capture], [])
    assert frames_by_direction_and_command(con, capture) == TRUTHS[capture]["frames"]
    assert summary.tls == {"decrypted": 1}


# -- secrets and the command line ------------------------------------------------------------


def secrets_in(keylogs: list[Path]) -> set[str]:
    found = set()
    for path in keylogs:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and not line.startswith("#"):
                found.add(parts[2].lower())
    return found


def test_no_secret_reaches_the_dataset_or_the_output(tmp_path, capsys):
    keylogs = sorted(SAMPLES.glob("*.keylog"))
    args = ["decode", *(str(SAMPLES / c) for c in [*RECORDED, "tls13_derived_secrets.pcapng"])]
    args += ["-o", str(tmp_path / "out"), "--jobs", "1"]
    args += [f"--tls-keylog={k}" for k in keylogs]
    assert pwcap_main(args) == 0
    printed = capsys.readouterr()
    secrets = secrets_in(keylogs)
    assert secrets
    for part in (tmp_path / "out").rglob("*.parquet"):
        raw = part.read_bytes()
        text = pq.read_table(part).to_pylist().__repr__().lower()
        for secret in secrets:
            assert (
                bytes.fromhex(secret) not in raw
                and secret not in text
                and secret.encode() not in raw
            )
    for secret in secrets:
        assert secret not in (printed.out + printed.err).lower()


def test_decode_reports_tls_outcomes_and_malformed_key_log_lines(tmp_path, capsys):
    good = keylog("tls13_aes_gcm.pcap").read_text()
    messy = tmp_path / "messy.keylog"
    messy.write_text(
        "# a comment\n\nnot a key log line\nCLIENT_RANDOM zz 00\nEXPORTER_SECRET "
        + "ab" * 32
        + " "
        + "cd" * 48
        + "\n"
        + good.replace("\n", "\r\n").upper()
    )
    captures = [str(SAMPLES / "tls13_aes_gcm.pcap"), str(SAMPLES / "tls13_chacha20.pcap")]
    code = pwcap_main(
        [
            "decode",
            *captures,
            "-o",
            str(tmp_path / "out"),
            "--jobs",
            "1",
            "--tls-keylog",
            str(messy),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "tls          1 decrypted, 1 (no keys 1) not; 2 malformed key log lines skipped" in out


def test_an_unreadable_key_log_is_a_one_line_error(tmp_path, capsys):
    code = pwcap_main(
        [
            "decode",
            str(SAMPLES / "tls13_aes_gcm.pcap"),
            "-o",
            str(tmp_path / "out"),
            "--tls-keylog",
            str(tmp_path / "none"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "key log" in err and "none" in err
    assert not (tmp_path / "out").exists()


def test_show_decrypts_with_a_key_log(capsys):
    capture = SAMPLES / "tls12_chacha20.pcap"
    assert pwcap_main(["show", str(capture), "--tls-keylog", str(keylog(capture.name))]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        sum("SEND_RECEIPT" in line for line in lines)
        == TRUTHS[capture.name]["frames"]["b2c"]["SEND_RECEIPT"]
    )


def test_tls_on_a_port_named_for_pulsar_is_still_found_by_its_clienthello(tmp_path):
    """A port hint decides a connection before any byte; its client's ClientHello still
    puts TLS in front of the Pulsar decoder."""
    capture = "tls12_chacha20.pcap"
    port = TRUTHS[capture]["capture"]["port"]
    out = tmp_path / "out"
    options = DecodeOptions(hints={"pulsar": [port]}, tls_keylogs=(str(keylog(capture)),))
    summary = decode_captures([SAMPLES / capture], out, options)
    con = views(out)
    assert frames_by_direction_and_command(con, capture) == TRUTHS[capture]["frames"]
    assert rows(con, "select kind from anomalies") == []
    assert summary.tls == {"decrypted": 1}
    assert rows(con, "select client_by, protocol from connections") == [
        {"client_by": "syn", "protocol": "pulsar"}
    ]
