"""Build a sample's truth file from the broker journal and the client's record."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from tests.corpus.record import ClientRecord


def read_journal(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def frame_counts(journal: list[dict]) -> dict[str, dict[str, int]]:
    counts: dict[str, Counter[str]] = {"c2b": Counter(), "b2c": Counter()}
    for row in journal:
        counts[row["dir"]][row["cmd"]] += 1
    return {direction: dict(sorted(c.items())) for direction, c in counts.items()}


def connections(journal: list[dict]) -> list[dict]:
    seen: dict[int, dict] = {}
    for row in journal:
        conn = seen.setdefault(
            row["conn"],
            {"conn": row["conn"], "client": row["client"], "broker": row["broker"], "frames": 0},
        )
        conn["frames"] += 1
    return list(seen.values())


def pick(rows: list[dict], cmd: str, keys: list[str]) -> list[dict]:
    return [
        {k: row[k] for k in ["t_us", "conn", *keys] if k in row}
        for row in rows
        if row["cmd"] == cmd
    ]


def zero_permit_intervals(journal: list[dict]) -> list[dict]:
    """Intervals during which a consumer's permit balance, as the broker kept it, was zero.

    The balance starts at zero when the broker answers SUBSCRIBE, grows with FLOW and
    shrinks by each delivered entry's number of messages. An interval ends with the FLOW
    that lifts the balance (``end_us`` is None if none came within the capture).
    """
    balance: dict[tuple[int, int], int] = {}
    open_since: dict[tuple[int, int], int] = {}
    subscribing: dict[tuple[int, int], tuple[int, int]] = {}
    intervals: list[dict] = []
    for row in journal:
        if row["cmd"] == "SUBSCRIBE":
            subscribing[(row["conn"], row["request_id"])] = (row["conn"], row["consumer_id"])
            continue
        if row["cmd"] == "SUCCESS" and (row["conn"], row.get("request_id")) in subscribing:
            key = subscribing.pop((row["conn"], row["request_id"]))
            balance[key] = 0
            open_since[key] = row["t_us"]
            continue
        key = (row["conn"], row.get("consumer_id", -1))
        if key not in balance:
            continue
        if row["cmd"] == "FLOW":
            balance[key] += row["permits"]
            if key in open_since:
                start = open_since.pop(key)
                intervals.append(_interval(key, start, row["t_us"]))
        elif row["cmd"] == "MESSAGE":
            balance[key] -= row.get("meta_num_messages", 1)
            if balance[key] == 0:
                open_since[key] = row["t_us"]
    intervals += [_interval(key, start, None) for key, start in open_since.items()]
    return intervals


def _interval(key: tuple[int, int], start: int, end: int | None) -> dict:
    return {
        "conn": key[0],
        "consumer_id": key[1],
        "start_us": start,
        "end_us": end,
        "length_us": None if end is None else end - start,
    }


def deliveries_by_message(journal: list[dict]) -> dict[str, list[int]]:
    """For each delivered entry id (ledger:entry), the redelivery counts it went out with."""
    seen: dict[str, list[int]] = defaultdict(list)
    for row in journal:
        if row["cmd"] == "MESSAGE":
            ledger, entry = row["message_ids"][0][:2]
            seen[f"{ledger}:{entry}"].append(row.get("redelivery_count", 0))
    return dict(seen)


def build_truth(
    name: str,
    description: str,
    journal: list[dict],
    record: ClientRecord,
    capture: dict,
) -> dict:
    return {
        "scenario": name,
        "description": description,
        "capture": capture,
        "frames": frame_counts(journal),
        "frames_total": len(journal),
        "connections": connections(journal),
        "sent": sorted(record.sent, key=lambda m: (m["topic"], m["sequence_id"])),
        "received": record.received,
        "send_failures": record.failed,
        "deliveries": pick(
            journal,
            "MESSAGE",
            ["consumer_id", "message_ids", "redelivery_count", "meta_num_messages"],
        ),
        "delivery_counts": deliveries_by_message(journal),
        "acks": pick(journal, "ACK", ["consumer_id", "ack_type", "message_ids"]),
        "flows": pick(journal, "FLOW", ["consumer_id", "permits"]),
        "redeliver_requests": pick(
            journal, "REDELIVER_UNACKNOWLEDGED_MESSAGES", ["consumer_id", "message_ids"]
        ),
        "zero_permit_intervals": zero_permit_intervals(journal),
    }


def clean_recording(truth: dict) -> bool:
    """A live recording whose connections all end as the journal says, with every frame
    whole: no client was killed in the middle of one (``capture.client_killed``)."""
    return not truth["capture"].get("client_killed", False)
