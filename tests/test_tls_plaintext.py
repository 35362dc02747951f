"""The same traffic decoded in plaintext and over TLS gives the same tables.

Real-client samples are re-sent over TLS 1.3 by the benchmark's generator
(``bench/tls_traffic.py``: the same packets and times, every connection encrypted with
secrets it logs); decoded with the key log, every table equals the plaintext decode's,
but for what TLS changes by definition: the ``tls_*`` columns, and the byte counts and
TCP figures of the segments the wire carried. The correctness of the decryption itself
is tested on captures of real TLS stacks (tests/test_tls_samples.py,
tests/test_tls_tshark.py).
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.decode.api import DecodeOptions
from pwcap.decode.driver import decode_captures
from pwcap.tables.schema import TABLES
from tests.bench_scripts import load_bench
from tests.conftest import SAMPLES

CAPTURES = ["pulsar_plain.pcap", "pulsar_batching_compression.pcap", "pulsar_chunked.pcap"]
CAPTURES += ["pulsar_ipv6.pcap", "pulsar_partitioned_port16650.pcap"]
# What TLS changes by definition: its own columns, and the segments the wire carried.
TLS_COLUMNS = {c.name for c in TABLES["connections"] if c.name.startswith("tls_")}
WIRE_COLUMNS = {"bytes_c2b", "bytes_b2c"}
WIRE_COLUMNS |= {c.name for c in TABLES["connections"] if c.name.startswith("tcp_")}


def rows(dataset: Path, table: str) -> Counter:
    """A table's rows as a multiset, without the columns TLS changes."""
    found = pq.read_table(dataset / table).to_pylist()
    dropped = TLS_COLUMNS | WIRE_COLUMNS
    return Counter(
        tuple(sorted((k, repr(v)) for k, v in row.items() if k not in dropped)) for row in found
    )


@pytest.mark.parametrize("name", CAPTURES)
def test_every_table_over_tls_equals_the_plaintext_decode(tmp_path, name):
    traffic = load_bench("tls_traffic")
    plain, tls = tmp_path / "plain" / name, tmp_path / "tls" / name  # one name: one conn_id
    plain.parent.mkdir()
    tls.parent.mkdir()
    shutil.copy(SAMPLES / name, plain)
    keylog = tmp_path / "keys.log"
    assert traffic.encrypt_capture(plain, tls, keylog) >= 1
    decode_captures([plain], tmp_path / "plain_out")
    summary = decode_captures(
        [tls], tmp_path / "tls_out", DecodeOptions(tls_keylogs=(str(keylog),))
    )

    assert summary.tls == {"decrypted": sum(summary.connections.values())}
    assert summary.rows["frames"] > 0
    for table in TABLES:
        assert rows(tmp_path / "tls_out", table) == rows(tmp_path / "plain_out", table), table
    tls_rows = pq.read_table(tmp_path / "tls_out" / "connections").to_pylist()
    for row in tls_rows:
        assert (row["tls_version"], row["tls_cipher"]) == ("TLS 1.3", "TLS_AES_128_GCM_SHA256")
        assert row["tls_sni"] == "broker.bench" and row["tls_decrypted"] is True
