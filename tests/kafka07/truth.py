"""A Kafka 0.7 sample's truth file, from the broker journal and the client's own record.

Responses carry no correlation id, so the journal's responses are paired with requests
in order per connection (PRODUCE and MULTIPRODUCE expect none); every row below names
its connection and the per-connection index (``request_seq``) of the request it belongs
to, and fetched parts name their position (``part``) in a MULTIFETCH.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque

from tests.kafka07.protocol import ERROR_NAMES

NO_RESPONSE = {"PRODUCE", "MULTIPRODUCE"}
MESSAGE_KEYS = [
    "offset",
    "next_offset",
    "magic",
    "compression",
    "crc_ok",
    "payload_size",
    "sha256",
    "inner_index",
]


def pair_responses(journal: list[dict]) -> list[tuple[dict, int, dict | None]]:
    """(request row, its per-connection index, its response row or None), in journal order."""
    pending: dict[int, deque[int]] = defaultdict(deque)
    pairs: list[tuple[dict, int, dict | None]] = []
    seq: Counter[int] = Counter()
    for row in journal:
        conn = row["conn"]
        if row["dir"] == "c2b":
            pairs.append((row, seq[conn], None))
            if row["type"] not in NO_RESPONSE:
                pending[conn].append(len(pairs) - 1)
            seq[conn] += 1
        elif row["dir"] == "b2c":
            index = pending[conn].popleft()
            request, number, _ = pairs[index]
            if request["type"] != row["type"]:
                raise ValueError(f"conn {conn}: {row['type']} answers a {request['type']}")
            pairs[index] = (request, number, row)
    return pairs


def frame_counts(journal: list[dict]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {"c2b": Counter(), "b2c": Counter()}
    for row in journal:
        if row["dir"] in counts:
            counts[row["dir"]][row["type"]] += 1
    return {direction: dict(sorted(c.items())) for direction, c in counts.items()}


def connections(journal: list[dict]) -> list[dict]:
    seen: dict[int, dict] = {}
    for row in journal:
        conn = seen.setdefault(
            row["conn"],
            {
                "conn": row["conn"],
                "client": row["client"],
                "broker": row["broker"],
                "requests": 0,
                "responses": 0,
                "closed_by_broker": False,
            },
        )
        if row["dir"] == "close":
            conn["closed_by_broker"] = True
        else:
            conn["requests" if row["dir"] == "c2b" else "responses"] += 1
    return list(seen.values())


def _message(message: dict, **context: object) -> dict:
    return {**context, **{k: message[k] for k in MESSAGE_KEYS}}


def produced(pairs: list[tuple[dict, int, dict | None]]) -> list[dict]:
    rows = []
    for request, seq, _ in pairs:
        if request["type"] not in NO_RESPONSE:
            continue
        for index, part in enumerate(request["parts"]):
            context = {
                "conn": request["conn"],
                "request_seq": seq,
                "request": request["type"],
                "part": index,
                "topic": part["topic"],
                "partition": part.get("stored_partition", part["partition"]),
                "stored": "stored_bytes" in part,
            }
            rows += [_message(m, **context) for m in part["messages"]]
    return rows


def fetches(pairs: list[tuple[dict, int, dict | None]]) -> tuple[list[dict], list[dict]]:
    """Per fetched part (with its error and truncated tail), and per message returned."""
    parts, messages = [], []
    for request, seq, response in pairs:
        if request["type"] not in ("FETCH", "MULTIFETCH") or response is None:
            continue
        for index, (asked, answered) in enumerate(
            zip(request["parts"], response["parts"], strict=True)
        ):
            context = {
                "conn": request["conn"],
                "request_seq": seq,
                "request": request["type"],
                "part": index,
                "topic": asked["topic"],
                "partition": asked["partition"],
            }
            parts.append(
                {
                    **context,
                    "offset": asked["offset"],
                    "max_size": asked["max_size"],
                    "error": answered["error"],
                    "error_name": ERROR_NAMES[answered["error"]],
                    "bytes": answered["bytes"],
                    "outer_messages": answered["outer_messages"],
                    "messages": len(answered["messages"]),
                    "truncated_tail": answered["truncated_tail"],
                }
            )
            fetch_offset = {"fetch_offset": asked["offset"]}
            messages += [_message(m, **context, **fetch_offset) for m in answered["messages"]]
    return parts, messages


def offsets(pairs: list[tuple[dict, int, dict | None]]) -> list[dict]:
    rows = []
    for request, seq, response in pairs:
        if request["type"] != "OFFSETS":
            continue
        asked = request["parts"][0]
        rows.append(
            {
                "conn": request["conn"],
                "request_seq": seq,
                "topic": asked["topic"],
                "partition": asked["partition"],
                "time": asked["time"],
                "max_offsets": asked["max_offsets"],
                "answered": response is not None,
                "offsets": None if response is None else response["parts"][0]["offsets"],
            }
        )
    return rows


def summary(produced_rows: list[dict], fetch_parts: list[dict], fetched: list[dict]) -> dict:
    def by(rows: list[dict], key: str) -> dict[str, int]:
        return dict(sorted(Counter(str(row[key]) for row in rows).items()))

    return {
        "messages_produced": len(produced_rows),
        "messages_stored": sum(row["stored"] for row in produced_rows),
        "messages_fetched": len(fetched),
        "produced_by_compression": by(produced_rows, "compression"),
        "fetched_by_compression": by(fetched, "compression"),
        "fetched_by_magic": by(fetched, "magic"),
        "crc_ok": by(produced_rows + fetched, "crc_ok"),
        "fetch_errors": by(fetch_parts, "error_name"),
        "truncated_tails": sum(1 for part in fetch_parts if part["truncated_tail"]),
    }


def build_truth(
    name: str,
    description: str,
    client: str,
    journal: list[dict],
    client_events: list[dict],
    capture: dict,
) -> dict:
    pairs = pair_responses(journal)
    produced_rows = produced(pairs)
    fetch_parts, fetched = fetches(pairs)
    return {
        "scenario": name,
        "description": description,
        "client": client,
        "capture": capture,
        "frames": frame_counts(journal),
        "frames_total": sum(1 for row in journal if row["dir"] != "close"),
        "closed_by_broker": sum(1 for row in journal if row["dir"] == "close"),
        "connections": connections(journal),
        "summary": summary(produced_rows, fetch_parts, fetched),
        "produced": produced_rows,
        "fetch_parts": fetch_parts,
        "fetched": fetched,
        "offsets": offsets(pairs),
        "client_events": client_events,
    }
