"""Shared fixtures: one local Spark session and one decoded dataset of every sample capture.

Both are session-scoped because they are the slow parts of the suite: starting Spark costs
seconds, and decoding every capture once lets many tests read the same Parquet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

SAMPLES = Path(__file__).resolve().parent.parent / "sample_pcaps"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """A small local Spark: two cores, two shuffle partitions, no UI, UTC timestamps."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("pwcap-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every capture in ``sample_pcaps/`` decoded once into one dataset directory."""
    try:
        from pwcap.decode.run import decode_captures
    except ImportError as error:  # the capture reader or the pipeline is not there yet
        pytest.skip(f"decode pipeline not available yet: {error}")
    out = tmp_path_factory.mktemp("sample_dataset") / "dataset"
    decode_captures(
        sorted(str(p) for p in SAMPLES.iterdir() if p.suffix in (".pcap", ".pcapng")), out
    )
    return out
