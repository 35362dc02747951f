"""``pwcap report``: the HTML page over a decoded dataset and its analytics.

A small dataset is built here row by row with pyarrow (schema from ``tables/schema.py``):
one Pulsar client that looks up, produces and consumes with a starved consumer and one
redelivered message, plus a TLS connection and two anomalies. The real analytics jobs run
on it in the shared Spark session, and the page is checked against the rows put in.
The sample captures, decoded by ``pwcap decode``, are rendered too.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pwcap.cli import main
from pwcap.report import render
from pwcap.report.decoded import MAX_BARS
from pwcap.tables.schema import arrow_schema

HOSTILE = 'persistent://public/default/<script>alert("x")</script>&<img src=x onerror=1>\x00\x1b'
SHOWN = HOSTILE.replace("\x00", "\ufffd").replace("\x1b", "\ufffd")  # controls: U+FFFD
SUBSCRIPTION = "sub-'\"><b>bold</b>"
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
CONN, TLS_CONN = 7, 8


def at(ms: float) -> datetime:
    return T0 + timedelta(milliseconds=ms)


def scenario() -> dict[str, list[dict[str, Any]]]:
    """Rows of one Pulsar connection: lookup, producer with three sends, a consumer granted
    2 permits then starved 300 ms before its next FLOW, one entry redelivered."""
    frames: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    offsets = {"c2b": 0, "b2c": 0}

    def frame(ms: float, direction: str, command: str, **fields: Any) -> None:
        size = 40
        frames.append(
            {
                "ts": at(ms),
                "ts_first": at(ms),
                "capture": "synthetic.pcap",
                "conn_id": CONN,
                "direction": direction,
                "protocol": "pulsar",
                "stream_offset": offsets[direction],
                "command": command,
                "frame_size": size,
                "topic": HOSTILE,
                **fields,
            }
        )
        offsets[direction] += size

    def answer(ms: float, command: str, request: str, request_ms: float, **fields: Any) -> None:
        frame(ms, "b2c", command, answers=request, request_ts=at(request_ms), **fields)

    frame(0, "c2b", "CONNECT", topic=None)
    answer(2, "CONNECTED", "CONNECT", 0, topic=None)
    frame(5, "c2b", "LOOKUP", request_id=1)
    answer(17, "LOOKUP_RESPONSE", "LOOKUP", 5, request_id=1)
    frame(20, "c2b", "PRODUCER", request_id=2, producer_id=1)
    answer(24, "PRODUCER_SUCCESS", "PRODUCER", 20, request_id=2, producer_name="p-1")
    for seq in range(3):
        sent = 30 + 10 * seq
        frame(sent, "c2b", "SEND", producer_id=1, sequence_id=seq, num_messages=1)
        answer(
            sent + 3,
            "SEND_RECEIPT",
            "SEND",
            sent,
            producer_id=1,
            sequence_id=seq,
            ledger_id=9,
            entry_id=seq,
        )
        messages.append(
            _message(sent, "c2b", "SEND", producer_id=1, sequence_id=seq, producer_name="p-1")
        )
    consumer = {"consumer_id": 1, "subscription": SUBSCRIPTION, "consumer_name": "c-1"}
    frame(100, "c2b", "SUBSCRIBE", request_id=3, **consumer)
    answer(104, "SUCCESS", "SUBSCRIBE", 100, request_id=3, **consumer)
    frame(105, "c2b", "FLOW", permits=2, **consumer)
    deliveries = [(110, 0, 0), (111, 1, 0), (420, 2, 0), (430, 0, 1)]  # ms, entry, redelivery
    for ms, entry, count in deliveries:
        if ms == 420:
            frame(415, "c2b", "FLOW", permits=10, **consumer)
        frame(
            ms,
            "b2c",
            "MESSAGE",
            ledger_id=9,
            entry_id=entry,
            num_messages=1,
            redelivery_count=count,
            **consumer,
        )
        messages.append(
            _message(
                ms,
                "b2c",
                "MESSAGE",
                ledger_id=9,
                entry_id=entry,
                sequence_id=entry,
                producer_name="p-1",
                redelivery_count=count,
                **consumer,
            )
        )
    frame(
        425,
        "c2b",
        "REDELIVER_UNACKNOWLEDGED_MESSAGES",
        num_message_ids=1,
        ledger_id=9,
        entry_id=0,
        **consumer,
    )
    for ms, entry in ((440, 0), (441, 1), (442, 2)):
        frame(
            ms,
            "c2b",
            "ACK",
            ledger_id=9,
            entry_id=entry,
            ack_type="Individual",
            num_message_ids=1,
            **consumer,
        )
    frame(500, "c2b", "PING", topic=None)
    answer(501, "PONG", "PING", 500, topic=None)
    anomalies = [
        {
            "ts": at(200),
            "capture": "synthetic.pcap",
            "conn_id": CONN,
            "direction": "b2c",
            "protocol": "pulsar",
            "kind": "gap",
            "stream_offset": 4000,
            "size": 100,
            "detail": "<missing> bytes",
        },
        {
            "ts": at(300),
            "capture": "synthetic.pcap",
            "conn_id": CONN,
            "direction": "b2c",
            "protocol": "pulsar",
            "kind": "bad_checksum",
            "stream_offset": 4200,
            "size": 60,
            "command": "MESSAGE",
            "detail": "crc mismatch",
        },
    ]
    connections = [
        {
            "conn_id": CONN,
            "capture": "synthetic.pcap",
            "protocol": "pulsar",
            "client_ip": "10.0.0.1",
            "client_port": 40000,
            "server_ip": "10.0.1.1",
            "server_port": 6650,
            "client_by": "syn",
            "client_version": "<evil-client>",
            "server_version": "Pulsar Server",
            "protocol_version": 19,
            "first_ts": at(0),
            "last_ts": at(501),
            "bytes_c2b": offsets["c2b"],
            "bytes_b2c": offsets["b2c"],
            "frames_c2b": sum(f["direction"] == "c2b" for f in frames),
            "frames_b2c": sum(f["direction"] == "b2c" for f in frames),
            "gaps": 1,
            "gap_bytes": 100,
            "anomalies": 2,
            "close_reason": "fin",
        },
        {
            "conn_id": TLS_CONN,
            "capture": "synthetic.pcap",
            "protocol": "tls",
            "client_ip": "10.0.0.2",
            "client_port": 40001,
            "server_ip": "10.0.1.1",
            "server_port": 6651,
            "client_by": "syn",
            "first_ts": at(1),
            "last_ts": at(9),
            "bytes_c2b": 500,
            "bytes_b2c": 900,
            "frames_c2b": 0,
            "frames_b2c": 0,
            "gaps": 0,
            "gap_bytes": 0,
            "anomalies": 0,
            "close_reason": "fin",
        },
    ]
    return {
        "frames": frames,
        "messages": messages,
        "connections": connections,
        "anomalies": anomalies,
    }


def _message(ms: float, direction: str, command: str, **fields: Any) -> dict[str, Any]:
    return {
        "ts": at(ms),
        "capture": "synthetic.pcap",
        "conn_id": CONN,
        "direction": direction,
        "protocol": "pulsar",
        "command": command,
        "topic": HOSTILE,
        "payload_size": 5,
        "publish_time": at(ms),
        **fields,
    }


def write_dataset(root: Path, tables: dict[str, list[dict[str, Any]]]) -> Path:
    for name, rows in tables.items():
        (root / name).mkdir(parents=True)
        table = pa.Table.from_pylist(rows, schema=arrow_schema(name))
        pq.write_table(table, root / name / "part-0.parquet")
    return root


@pytest.fixture(scope="module")
def rows() -> dict[str, list[dict[str, Any]]]:
    return scenario()


@pytest.fixture(scope="module")
def dataset(
    rows: dict[str, list[dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    return write_dataset(tmp_path_factory.mktemp("report") / "dataset", rows)


@pytest.fixture(scope="module")
def analytics(dataset: Path, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real analytics jobs run on the small dataset, then the findings over them."""
    from pwcap.jobs import findings, latency, permits, redelivery
    from pwcap.jobs.common import read_back, read_table, write_tables

    frames, messages, connections = (
        read_table(spark, [str(dataset)], name) for name in ("frames", "messages", "connections")
    )
    out = tmp_path_factory.mktemp("report") / "analytics"
    tables = {
        **latency.tables(frames, messages, connections, "1 minutes"),
        **permits.tables(frames),
        **redelivery.tables(frames, messages, "1 minutes"),
    }
    written = write_tables(tables, str(out))
    found = findings.tables(frames, messages, connections, read_back(spark, written))
    write_tables(found, str(out))
    return out


class Page(HTMLParser):
    """The parsed page: every element must close in order (well-formed), text per section."""

    VOID = frozenset({"meta", "br", "img", "hr", "input", "link"})

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: Counter[str] = Counter()
        self.sections: dict[str, list[str]] = {}
        self.current: str | None = None
        self.in_svg = 0  # chart text (axis labels, tooltips) is not part of a section's text
        self.in_title = False
        self.charts: dict[str, list[str]] = {}  # tooltips of each section's chart marks
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1
        if tag == "section":
            self.current = dict(attrs)["id"]
            self.sections[self.current] = []
            self.charts[self.current] = []
        self.in_title = tag == "title" and self.in_svg > 0
        if tag == "svg":
            self.in_svg += 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags[tag] += 1

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        self.in_title = False
        if tag == "svg":
            self.in_svg -= 1
        if tag == "section":
            self.current = None

    def handle_data(self, data: str) -> None:
        if self.current and self.in_title:
            self.charts[self.current].append(data)
        elif self.current and not self.in_svg:
            self.sections[self.current].append(data)

    def text(self, section: str) -> str:
        return " ".join(" ".join(self.sections[section]).split())


def parse(html: str) -> Page:
    page = Page(html)
    assert page.errors == [] and page.stack == []
    return page


SECTIONS = {
    "findings",
    "answers",
    "connections",
    "frames",
    "anomalies",
    "latency",
    "permits",
    "redelivery",
}


def test_page_is_well_formed_with_every_section(dataset: Path, analytics: Path) -> None:
    page = parse(render(dataset, analytics))
    assert set(page.sections) == SECTIONS
    assert page.tags["svg"] >= 6
    assert "is missing" not in " ".join(page.text(s) for s in SECTIONS)


def test_capture_strings_are_escaped(dataset: Path, analytics: Path) -> None:
    html = render(dataset, analytics)
    page = parse(html)
    for raw in ("<script", "<img", "<b>bold", "<evil-client>", "<missing>"):
        assert raw not in html
    assert page.tags["script"] == 0 and page.tags["img"] == 0
    # The names still read right once unescaped by the browser.
    assert SHOWN in page.text("latency") and SUBSCRIPTION in page.text("permits")
    assert "<evil-client>" in page.text("connections")


def test_frame_counts_match_the_rows(dataset: Path, rows: dict[str, list[dict[str, Any]]]) -> None:
    page = parse(render(dataset))
    text = page.text("frames")
    sizes: Counter[str] = Counter()
    for f in rows["frames"]:
        sizes[f["command"]] += f["frame_size"]
    for command, n in Counter(f["command"] for f in rows["frames"]).items():
        assert f"pulsar {command} {n:,} {sizes[command]:,}" in text
        assert f"pulsar {command}: {n:,}" in page.charts["frames"]
    kinds = Counter(a["kind"] for a in rows["anomalies"])
    assert {f"{kind}: {n}" for kind, n in kinds.items()} <= set(page.charts["anomalies"])
    assert f"First anomalies ({len(rows['anomalies'])} of {len(rows['anomalies'])})" in (
        page.text("anomalies")
    )


def test_latency_section_shows_each_kind_with_its_latency(dataset: Path, analytics: Path) -> None:
    text = parse(render(dataset, analytics)).text("latency")
    # LOOKUP answered 12 ms after the request; the three SENDs each 3 ms.
    assert "LOOKUP 1 0 0 12 ms 12 ms 12 ms 12 ms" in text
    assert "SEND 3 0 0 3 ms 3 ms 3 ms 3 ms" in text
    # Worst window first: publish -> delivery, sent at 30/40/50 ms and delivered at
    # 110/111/420 ms (the last held back by starvation): median 80 ms.
    assert f"publish_delivery {SHOWN} {SUBSCRIPTION} 10.0.1.1:6650 3 0 0 80 ms" in text


def test_permit_section_names_the_starved_consumer(dataset: Path, analytics: Path) -> None:
    page = parse(render(dataset, analytics))
    text = page.text("permits")
    # Two permits spent by 111 ms, the next FLOW at 415 ms: 304 ms at zero.
    assert "304 ms" in text
    assert "flow" in text  # ended by the FLOW


def test_redelivery_section_counts_the_redelivered_entry(dataset: Path, analytics: Path) -> None:
    text = parse(render(dataset, analytics)).text("redelivery")
    row = f"1 {SHOWN} {SUBSCRIPTION} 4 25.0% 1 0"  # redeliveries first: the order of the rows
    assert row in text


def test_without_analytics_the_page_says_what_is_missing(dataset: Path) -> None:
    page = parse(render(dataset))
    assert "no analytics folder given" in page.text("answers")
    for section in ("latency", "permits", "redelivery"):
        assert "is missing" in page.text(section)


def test_partial_dataset_renders_what_exists(tmp_path: Path, rows: dict[str, list]) -> None:
    partial = write_dataset(tmp_path / "partial", {"frames": rows["frames"]})
    page = parse(render(partial, tmp_path / "nowhere"))
    assert "Table connections is missing" in page.text("connections")
    assert "pulsar SEND 3" in page.text("frames")


def test_cli_writes_the_page(dataset: Path, analytics: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(dataset), "--analytics", str(analytics), "-o", str(out)]) == 0
    assert parse(out.read_text(encoding="utf-8")).sections.keys() == SECTIONS
    assert main(["report", str(tmp_path / "absent"), "-o", str(out)]) == 1


def test_page_size_is_bounded_whatever_the_table_sizes(tmp_path: Path) -> None:
    """Many commands, connections, anomalies, latency pairs and permit events: every table
    is cut to its top rows and every chart binned or downsampled."""
    from pwcap.report import analytics as sections
    from pwcap.report.decoded import TOP

    n_frames, n_pairs, consumers, events = 200_000, 200_000, 20, 5_000
    start = int(T0.timestamp() * 1e6)
    commands = [f"CMD_{i:03d}" for i in range(MAX_BARS + 20)]
    frames = pa.table(
        {
            "ts": pa.array([start + i for i in range(n_frames)], pa.timestamp("us", tz="UTC")),
            "conn_id": pa.array([i % 5_000 for i in range(n_frames)], pa.int64()),
            "protocol": ["pulsar"] * n_frames,
            "command": [commands[i % len(commands)] for i in range(n_frames)],
            "frame_size": pa.array([64] * n_frames, pa.int32()),
        }
    )
    connections = pa.table(
        {
            "conn_id": pa.array(range(5_000), pa.int64()),
            "protocol": ["pulsar"] * 5_000,
            "frames_c2b": pa.array([i % 97 for i in range(5_000)], pa.int64()),
            "frames_b2c": pa.array([0] * 5_000, pa.int64()),
        }
    )
    anomalies = pa.table({"kind": [f"kind_{i % 60}" for i in range(10_000)]})
    pairs = pa.table(
        {
            "kind": [f"KIND_{i % 50}" for i in range(n_pairs)],
            "request_ts": pa.array(
                [start + 17 * i for i in range(n_pairs)], pa.timestamp("us", tz="UTC")
            ),
            "latency_us": pa.array([1 + (i * 7919) % 100_000 for i in range(n_pairs)], pa.int64()),
            "outcome": ["success"] * n_pairs,
        }
    )
    n_events = consumers * events
    timeline = pa.table(
        {
            "conn_id": pa.array([i // events for i in range(n_events)], pa.int64()),
            "consumer_id": pa.array([1] * n_events, pa.int64()),
            "ts": pa.array([start + i for i in range(n_events)], pa.timestamp("us", tz="UTC")),
            "balance": pa.array([(i * 31) % 11 - 1 for i in range(n_events)], pa.int64()),
        }
    )
    summary = pa.table(
        {
            "conn_id": pa.array(range(consumers), pa.int64()),
            "consumer_id": pa.array([1] * consumers, pa.int64()),
            "starved_us": pa.array(range(consumers), pa.int64()),
        }
    )
    root = tmp_path / "big"
    tables = {"dataset/frames": frames, "dataset/connections": connections}
    tables |= {"dataset/anomalies": anomalies, "analytics/latency_pairs": pairs}
    tables |= {"analytics/permit_timeline": timeline, "analytics/permit_summary": summary}
    for name, table in tables.items():
        (root / name).mkdir(parents=True)
        pq.write_table(table, root / name / "part-0.parquet", row_group_size=50_000)

    html = render(root / "dataset", root / "analytics")
    page = parse(html)
    assert len(html) < 1_000_000
    rows = [body.split("</tbody>")[0].count("<tr>") for body in html.split("<tbody>")[1:]]
    # Commands and latency kinds are listed whole (a protocol has a few dozen); connections,
    # anomalies, slowest pairs and starved consumers are cut to the top rows.
    assert max(rows) == len(commands) and rows.count(TOP) == 3
    assert len(page.charts["frames"]) <= MAX_BARS + 1  # bars, and a clipped label's tooltip
    assert page.tags["circle"] <= sections.SERIES * sections.TIME_BINS
    polylines = [p for p in html.split("<polyline")[1:] if 'stroke-width="1.4"' in p]
    assert len(polylines) == sections.CONSUMERS
    for line in polylines:
        points = line.split('points="')[1].split('"')[0].split()
        assert len(points) <= 2 * sections.TIMELINE_POINTS + 2


def test_sample_captures_report_matches_their_tables(sample_dataset: Path) -> None:
    """The decoded sample captures: every count on the page is the count in the Parquet."""
    page = parse(render(sample_dataset))
    assert set(page.sections) == SECTIONS
    frames = pq.read_table(sample_dataset / "frames", columns=["protocol", "command"])
    commands = Counter(
        (row["protocol"], row["command"] or "(unknown type)") for row in frames.to_pylist()
    )
    text, bars = page.text("frames"), set(page.charts["frames"])
    for (protocol, command), n in commands.items():
        assert f"{protocol} {command} {n:,} " in text
        assert f"{protocol} {command}: {n:,}" in bars or len(commands) > MAX_BARS
    kinds = Counter(
        pq.read_table(sample_dataset / "anomalies", columns=["kind"])["kind"].to_pylist()
    )
    assert {f"{kind}: {n:,}" for kind, n in kinds.items()} <= set(page.charts["anomalies"])
    connections = pq.read_table(sample_dataset / "connections", columns=["protocol"])
    protocols = Counter(connections["protocol"].to_pylist())
    assert {f"{p}: {n:,}" for p, n in protocols.items()} <= set(page.charts["connections"])
    answers = page.text("answers")
    for name, table in (("frames", frames), ("connections", connections)):
        assert f"{table.num_rows:,} {name} rows" in answers


DOC = Path(__file__).resolve().parent.parent / "docs" / "dashboards.md"


def test_dashboard_queries_run_on_a_dataset_and_its_analytics(
    dataset: Path, analytics: Path
) -> None:
    """Every SQL block of docs/dashboards.md runs in DuckDB as written (paths aside)."""
    duckdb = pytest.importorskip("duckdb")
    blocks = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    con = duckdb.connect()
    results = []
    for block in blocks:
        block = block.replace("'out.parquet/", f"'{dataset}/").replace(
            "'analytics/", f"'{analytics}/"
        )
        for statement in filter(str.strip, block.split(";")):
            if statement.lstrip().startswith("SELECT"):
                results.append(con.sql(statement).to_arrow_table())  # Arrow: no pytz needed
            else:
                con.execute(statement)
    assert len(results) == len(blocks) - 1  # one query per block after the views
    p99 = dict(
        con.sql(
            "SELECT kind, quantile_cont(latency_us, 0.99) FROM latency_pairs GROUP BY kind"
        ).fetchall()
    )
    assert p99["LOOKUP"] == 12_000  # the LOOKUP answered 12 ms after it was sent
    starved = con.sql("SELECT starved_us FROM permit_summary WHERE starved_us > 0").fetchall()
    assert starved == [(304_000,)]


def test_dashboard_python_examples_run_where_the_doc_says(
    dataset: Path, analytics: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The notebook snippets, run in a folder holding ``out.parquet`` and ``analytics``."""
    pytest.importorskip("duckdb")
    (tmp_path / "out.parquet").symlink_to(dataset)
    (tmp_path / "analytics").symlink_to(analytics)
    monkeypatch.chdir(tmp_path)
    snippets = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    names: dict[str, Any] = {}
    for snippet in snippets:
        exec(snippet, names)
    assert dict(zip(*names["p99"].to_pydict().values(), strict=True))["LOOKUP"] == 12_000
    flows = [f for f in scenario()["frames"] if f["command"] == "FLOW"]
    assert names["frames"]["permits"].to_pylist() == [f["permits"] for f in flows]


def test_tables_without_rows_render_as_empty_sections(
    dataset: Path, analytics: Path, tmp_path: Path
) -> None:
    """A capture with no redelivery or starvation gives empty typed tables: no error."""
    names: list[str] = []
    for source, name in ((dataset, "dataset"), (analytics, "analytics")):
        for table in filter(Path.is_dir, source.iterdir()):
            schema = pq.read_schema(next(table.glob("*.parquet")))
            (tmp_path / name / table.name).mkdir(parents=True)
            pq.write_table(schema.empty_table(), tmp_path / name / table.name / "part-0.parquet")
            names.append(table.name)
    page = parse(render(tmp_path / "dataset", tmp_path / "analytics"))
    assert set(page.sections) == SECTIONS
    answers = page.text("answers")
    assert all(f"0 {name} rows" in answers for name in names)
    assert "is missing" not in " ".join(page.text(s) for s in SECTIONS)
    assert "No message was delivered twice" in page.text("redelivery")
    # No chart heading over no chart: a clean capture says it has no anomalies.
    assert "Anomalies by kind" not in page.text("anomalies")
    assert "No anomalies" in page.text("anomalies")


# -- the answers first ------------------------------------------------------------------------


def test_findings_come_first_each_linking_to_its_evidence(dataset: Path, analytics: Path) -> None:
    import pyarrow.dataset as ds

    html = render(dataset, analytics)
    page = parse(html)
    assert list(page.sections)[:2] == ["findings", "answers"]
    rows = ds.dataset(analytics / "findings").to_table().to_pylist()
    assert rows, "the scenario redelivers an entry with no cause on the wire: a finding"
    findings = html.split('<section id="findings">')[1].split("</section>")[0]
    assert findings.count('<li class="finding') == len(rows)
    links = re.findall(r'<a href="#(\w+)">', findings)
    assert links and set(links) <= set(page.sections)
    assert "<script>" not in findings and "&lt;script&gt;" in findings


def test_answers_follow_each_linking_to_its_section(dataset: Path, analytics: Path) -> None:
    html = render(dataset, analytics)
    page = parse(html)
    assert list(page.sections)[1] == "answers"
    links = re.findall(r'class="answer" href="#(\w+)"', html)
    assert len(links) == 6 and set(links) <= set(page.sections)


def test_answers_say_what_the_tables_say(dataset: Path, analytics: Path) -> None:
    """Each answer is checked against the analytics tables, queried here with DuckDB."""
    duckdb = pytest.importorskip("duckdb")
    from pwcap.report.markup import micros

    text = parse(render(dataset, analytics)).text("answers")
    pairs = f"'{analytics}/latency_pairs/*.parquet'"
    ((kind, p99, n),) = duckdb.sql(
        f"select kind, quantile_cont(latency_us, 0.99) p, count(*) from {pairs}"
        " where latency_us is not null group by kind order by p desc limit 1"
    ).fetchall()  # by kind, over the capture: the values of the latency section's table
    assert f"Worst p99 latency, by kind {micros(p99)} {micros(p99)} {kind} (n={n:,})" in text
    ((unanswered,),) = duckdb.sql(
        f"select count(*) from {pairs} where outcome = 'unanswered' and kind != 'delivery_ack'"
    ).fetchall()
    assert f"Unanswered requests {unanswered:,}" in text
    # One consumer, starved once for 304 ms; one redelivery of four deliveries; two
    # anomalies; the connections span 0 to 501 ms of one capture.
    assert "Starved consumers 1 of 1 304 ms starved in all" in text
    summary = f"'{analytics}/permit_summary/*.parquet'"
    ((queue,),) = duckdb.sql(f"select receiver_queue_size from {summary}").fetchall()
    assert f": likely its receiver queue of {queue:,}" in text
    assert "Redelivery rate 25.0% 1 redeliveries of 4 deliveries" in text
    assert "Anomalies 2 gap 1 bad_checksum 1" in text or "Anomalies 2 bad_checksum 1 gap 1" in text
    assert "Capture span 501 ms from 2026-11-22 12:00:00 to 2026-11-22 12:00:00 UTC" in text


def test_the_page_names_its_version_and_when_it_was_made(dataset: Path) -> None:
    from pwcap import __version__

    html = render(dataset)
    header = html.split("</header>")[0]
    assert f"pwcap {__version__}, generated {datetime.now(UTC):%Y-%m-%d}" in header


def test_sample_report_ids_are_plain_and_anomalies_in_time_order(sample_dataset: Path) -> None:
    html = render(sample_dataset)
    ids = pq.read_table(sample_dataset / "connections", columns=["conn_id"])["conn_id"]
    shown = [i for i in ids.to_pylist() if str(i) in html]
    assert shown and not any(f"{i:,}" in html for i in ids.to_pylist())
    section = html.split('<section id="anomalies">')[1].split("</section>")[0]
    times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?", section)
    stamps = pq.read_table(sample_dataset / "anomalies", columns=["ts"])["ts"].to_pylist()
    earliest = sorted(t for t in stamps if t is not None)[: len(times)]
    assert times == [t.strftime("%Y-%m-%d %H:%M:%S.%f") for t in earliest]
