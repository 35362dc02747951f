"""Report sections over the decoded dataset: overview, connections, frames, anomalies."""

from __future__ import annotations

import pyarrow.compute as pc

from . import markup as m
from . import svg
from .tables import (
    Source,
    count_by,
    sum_by,
    top_rows,
)

TOP = 25  # rows of any table shown in full
MAX_BARS = 40  # bars of any bar chart


def missing(source: Source, *names: str) -> str:
    """A visible notice for each table a section needed and did not find."""
    notices = [
        f'<p class="missing">Table <b>{m.esc(name)}</b> is missing'
        f" ({m.esc(source.problems.get(name, 'not found'))})"
        f" under {m.esc(source.root or '(none)')}.</p>"
        for name in names
        if name not in source.tables
    ]
    return "".join(notices)


def _count(n: int) -> str:
    return f"{n:,}"


CONNECTION_COLUMNS = [
    ("frames", "frames"),
    ("conn_id", "conn"),
    ("capture", "capture"),
    ("protocol", "protocol"),
    ("client", "client"),
    ("server", "broker"),
    ("client_version", "client version"),
    ("server_version", "server version"),
    ("auth_method", "auth"),
    ("first_ts", "first"),
    ("last_ts", "last"),
    ("bytes", "bytes"),
    ("gaps", "gaps"),
    ("anomalies", "anomalies"),
    ("close_reason", "closed by"),
]


def connections(decoded: Source) -> str:
    table = decoded.get("connections")
    if table is None:
        return m.section("connections", "Connections", [missing(decoded, "connections")])
    by_protocol = count_by(table, ["protocol"])
    chart = svg.bars(
        [(str(k[0]), n) for k, n in by_protocol.most_common(MAX_BARS)], _count, "connections"
    )
    rows = table.to_table()  # one row per connection: small next to frames
    total = rows.num_rows
    frames = pc.add(pc.fill_null(rows["frames_c2b"], 0), pc.fill_null(rows["frames_b2c"], 0))
    rows = rows.append_column("frames", frames)
    order = pc.select_k_unstable(rows, min(TOP, total), [("frames", "descending")])
    shown = []
    for row in rows.take(order).to_pylist():
        row["client"] = f"{row.get('client_ip')}:{row.get('client_port')}"
        row["server"] = f"{row.get('server_ip')}:{row.get('server_port')}"
        row["bytes"] = (row.get("bytes_c2b") or 0) + (row.get("bytes_b2c") or 0)
        shown.append(row)
    shown.sort(key=lambda r: -r["frames"])
    return m.section(
        "connections",
        "Connections",
        [
            m.subsection("Connections by protocol", [chart]),
            m.subsection(
                f"Busiest connections ({len(shown)} of {total:,}, by frames)",
                [m.table(shown, CONNECTION_COLUMNS)],
            ),
        ],
    )


def frames(decoded: Source) -> str:
    table = decoded.get("frames")
    if table is None:
        return m.section("frames", "Frames per command", [missing(decoded, "frames")])
    sums = sum_by(table, ["protocol", "command"], ["frame_size"], count=True)
    rows = [
        {"protocol": protocol, "command": command or "(unknown type)", "frames": n, "bytes": size}
        for (protocol, command), (size, n) in sums.items()
    ]
    rows.sort(key=lambda r: (-r["frames"], str(r["protocol"]), str(r["command"])))
    items = [(f"{r['protocol']} {r['command']}", r["frames"]) for r in rows[:MAX_BARS]]
    parts = [svg.bars(items, _count, "frames per command")]
    if len(rows) > MAX_BARS:
        parts.append(m.note(f"{MAX_BARS} most frequent of {len(rows)} commands drawn."))
    columns = [
        ("protocol", "protocol"),
        ("command", "command"),
        ("frames", "frames"),
        ("bytes", "bytes on the wire"),
    ]
    parts.append(m.table(rows, columns))
    return m.section("frames", "Frames per command", parts)


ANOMALY_COLUMNS = [
    ("ts", "time"),
    ("capture", "capture"),
    ("conn_id", "conn"),
    ("direction", "dir"),
    ("kind", "kind"),
    ("command", "command"),
    ("stream_offset", "offset"),
    ("size", "bytes"),
    ("detail", "detail"),
]


def anomalies(decoded: Source) -> str:
    table = decoded.get("anomalies")
    if table is None:
        return m.section("anomalies", "Anomalies", [missing(decoded, "anomalies")])
    counts = count_by(table, ["kind"])
    total = sum(counts.values())
    items = [(str(kind), n) for (kind,), n in counts.most_common(MAX_BARS)]
    columns = [c for c, _ in ANOMALY_COLUMNS]
    if decoded.has("anomalies", "ts"):  # the earliest, in time order
        rows = top_rows(table, columns, "ts", TOP, largest=False)
    else:
        rows = table.head(TOP, columns=[c for c in columns if c in table.schema.names]).to_pylist()
    return m.section(
        "anomalies",
        "Anomalies",
        [
            m.subsection("Anomalies by kind", [svg.bars(items, _count, "anomalies by kind")]),
            m.subsection(
                f"First anomalies ({len(rows)} of {total:,})", [m.table(rows, ANOMALY_COLUMNS)]
            ),
        ]
        if total
        else [m.note("No anomalies: every byte of the capture decoded at face value.")],
    )
