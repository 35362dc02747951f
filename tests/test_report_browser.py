"""The report of the sample captures in a real browser: Debian's headless Chromium.

The page must load with no console error (a Content-Security-Policy violation is one), ask
for nothing over the network, fit 1400 px without a side scroll, and draw data in every
chart. What a reader sees must agree with itself and with the tables: the answer cards
with the tables under them, and no heading over nothing.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.cli import main
from pwcap.report.analytics import CONSUMERS
from pwcap.report.markup import micros
from tests.report_browser import CHROMIUM, WIDTH, Visit, visit

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "hostile" / "pulsar_hostile_names.pcap"
# The official Python client on the real broker, its consumer slowed: starved, and no
# byte of the capture damaged.
CLEAN = ROOT / "sample_pcaps" / "realpulsar_python_slow_consumer.pcap"
CARD_LINE = re.compile(r"(?P<p99>.+) (?P<kind>\S+) \(n=(?P<n>[\d,]+)\)")

pytest.importorskip("playwright")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists() or shutil.which("java") is None,
    reason="needs Debian's chromium (apt-get install chromium) and Java for the analytics",
)


@pytest.fixture(scope="module")
def report(spark, sample_dataset: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("browser")
    assert main(["analyze", str(sample_dataset), "-o", str(out / "analytics")]) == 0
    page = out / "report.html"
    args = ["report", str(sample_dataset), "--analytics", str(out / "analytics"), "-o", str(page)]
    assert main(args) == 0
    return page


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def seen(report: Path, screenshots: Path) -> Visit:
    return visit(report, screenshots=screenshots)


def test_the_sample_report_loads_cleanly_and_every_chart_has_data(
    report: Path, seen: Visit, screenshots: Path
):
    """Permit timelines are drawn for the starved consumers only: one chart each, for the
    most-starved up to the report's cap."""
    assert seen.console_errors == []
    assert seen.requests == [report.resolve().as_uri()]  # the page itself, nothing else
    assert seen.width <= WIDTH
    assert seen.cut_tables == []  # every column in sight, none behind a sideways scroll
    assert len(seen.charts) >= 6
    assert [c for c in seen.charts if c["marks"] == 0] == []
    labels = {c["label"] for c in seen.charts}
    assert {"latency by kind", "latency over time", "permit balance"} <= labels
    summary = pq.read_table(report.parent / "analytics" / "permit_summary")
    starved = sum(1 for us in summary["starved_us"].to_pylist() if us)
    drawn = sum(c["label"] == "permit balance" for c in seen.charts)
    assert 0 < drawn == min(starved, CONSUMERS)  # the most-starved ones, up to the report's cap
    assert seen.bare_headings == []
    assert sorted(p.name for p in screenshots.iterdir()) == [
        "report-latency.png",
        "report-permits.png",
        "report.png",
    ]


def test_the_worst_p99_card_shows_the_p99_of_the_table_below_it(report: Path, seen: Visit):
    """As drawn: the card's p99 by kind, the latency section's table by kind (the one with
    a p90 column) and DuckDB's p99 of the pairs table, kind by kind."""
    duckdb = pytest.importorskip("duckdb")
    pairs = f"'{report.parent / 'analytics' / 'latency_pairs'}/*.parquet'"
    p99 = dict(
        duckdb.sql(
            f"select kind, quantile_cont(latency_us, 0.99) from {pairs}"
            " where latency_us is not null group by kind"
        ).fetchall()
    )
    by_kind = {row["kind"]: row for row in seen.table("latency", "p90")}
    assert {kind: by_kind[kind]["p99"] for kind in p99} == {k: micros(v) for k, v in p99.items()}
    card = seen.card("Worst p99 latency")
    worst = max(p99, key=p99.__getitem__)
    assert card["value"] == micros(p99[worst]) == by_kind[worst]["p99"]
    listed = [CARD_LINE.fullmatch(line) for line in card["lines"]]
    assert listed[0]["kind"] == worst
    for line in listed:
        assert line["p99"] == by_kind[line["kind"]]["p99"]
        assert line["n"] == by_kind[line["kind"]]["answered"]


def test_the_starved_consumers_card_names_each_ones_receiver_queue(report: Path, seen: Visit):
    """The likely cause, from the permit summary the permits section shows further down."""
    summary = pq.read_table(report.parent / "analytics" / "permit_summary").to_pylist()
    starved = sorted((r for r in summary if r["starved_us"]), key=lambda r: -r["starved_us"])
    card = seen.card("Starved consumers")
    assert card["value"] == f"{len(starved)} of {len(summary)}"
    assert len(card["lines"]) > 1 and starved
    for consumer, line in zip(starved, card["lines"][1:], strict=False):
        assert line.startswith(micros(consumer["starved_us"]))
        assert line.endswith(f": likely its receiver queue of {consumer['receiver_queue_size']:,}")


def test_a_clean_capture_draws_no_anomaly_heading_over_nothing(tmp_path):
    dataset, page = tmp_path / "dataset", tmp_path / "report.html"
    assert main(["decode", "-q", str(CLEAN), "-o", str(dataset)]) == 0
    assert pq.read_table(dataset / "anomalies").num_rows == 0  # the premise
    assert main(["report", str(dataset), "-o", str(page)]) == 0
    seen = visit(page)
    assert seen.console_errors == []
    assert seen.bare_headings == []
    assert "Anomalies by kind" not in seen.sections["anomalies"]
    assert "No anomalies" in seen.sections["anomalies"]


def test_names_of_ten_thousand_characters_keep_the_page_within_the_window(spark, tmp_path):
    """The hostile capture (tests/hostile/): names of 10,000 characters in headings, cards
    and tables; the page stays 1400 px wide."""
    dataset, analytics, page = tmp_path / "dataset", tmp_path / "analytics", tmp_path / "r.html"
    assert main(["decode", "-q", str(HOSTILE), "-o", str(dataset)]) == 0
    assert main(["analyze", str(dataset), "-o", str(analytics)]) == 0
    assert main(["report", str(dataset), "--analytics", str(analytics), "-o", str(page)]) == 0
    seen = visit(page)
    assert seen.console_errors == []
    assert seen.width <= WIDTH and seen.cut_tables == []
