"""The report of the sample captures in a real browser: Debian's headless Chromium.

The page must load with no console error (a Content-Security-Policy violation is one), ask
for nothing over the network, fit 1400 px without a side scroll, and draw data in every
chart.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pwcap.cli import main
from tests.report_browser import CHROMIUM, WIDTH, visit

HOSTILE = Path(__file__).resolve().parent / "hostile" / "pulsar_hostile_names.pcap"

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


def test_the_sample_report_loads_cleanly_and_every_chart_has_data(report: Path, tmp_path):
    """Permit timelines are drawn for the starved consumers only: one chart each."""
    seen = visit(report, screenshots=tmp_path)
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
    assert 0 < starved == sum(c["label"] == "permit balance" for c in seen.charts)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "report-latency.png",
        "report-permits.png",
        "report.png",
    ]


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
