"""The broker's own account of a scenario: its admin API's topic statistics, sampled.

Every ``INTERVAL_S`` the sampler lists the namespace's topics, keeps the scenario's (by
name prefix) and asks the broker for each one's stats. A sample keeps the request's send
and answer times, so a test knows the window in which the broker took its numbers, and the
fields that describe flow control, acknowledgement and redelivery (the full answer is ~3 kB
of mostly rates).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

INTERVAL_S = 0.1
NAMESPACE = "public/default"

TOPIC_FIELDS = ("msgInCounter", "msgOutCounter", "bytesInCounter", "bytesOutCounter")
PUBLISHER_FIELDS = ("producerName", "producerId", "address", "clientVersion")
SUBSCRIPTION_FIELDS = (
    "type",
    "msgBacklog",
    "msgBacklogNoDelayed",
    "msgDelayed",
    "msgInReplay",
    "unackedMessages",
    "msgOutCounter",
    "msgRateRedeliver",
    "blockedSubscriptionOnUnackedMsgs",
    "nonContiguousDeletedMessagesRanges",
)
CONSUMER_FIELDS = (
    "consumerName",
    "address",
    "availablePermits",
    "unackedMessages",
    "msgOutCounter",
    "msgRateRedeliver",
    "blockedConsumerOnUnackedMsgs",
    "keyHashRanges",
    "lastConsumedFlowTimestamp",
    "lastAckedTimestamp",
    "lastConsumedTimestamp",
)


def now_us() -> int:
    return time.time_ns() // 1000


def _pick(source: dict, fields: tuple[str, ...]) -> dict:
    return {name: source[name] for name in fields if name in source}


def compact(stats: dict) -> dict:
    """The fields of a topic's stats that the tests compare, nested as the broker nests them."""
    out = _pick(stats, TOPIC_FIELDS)
    out["publishers"] = [_pick(p, PUBLISHER_FIELDS) for p in stats.get("publishers", [])]
    out["subscriptions"] = {
        name: {
            **_pick(sub, SUBSCRIPTION_FIELDS),
            "consumers": [_pick(c, CONSUMER_FIELDS) for c in sub.get("consumers", [])],
        }
        for name, sub in sorted(stats.get("subscriptions", {}).items())
    }
    return out


class StatsSampler:
    """``with StatsSampler(admin_url, prefix) as sampler:`` samples until the block ends."""

    def __init__(self, admin_url: str, topic_prefix: str) -> None:
        self.admin_url = admin_url
        self.prefix = f"persistent://{NAMESPACE}/{topic_prefix}"
        self.samples: list[dict] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stats-sampler", daemon=True)

    def _get(self, path: str) -> object:
        with urllib.request.urlopen(self.admin_url + path, timeout=5) as response:
            return json.load(response)

    def _topics(self) -> list[str]:
        listed = self._get(f"/admin/v2/persistent/{NAMESPACE}")
        assert isinstance(listed, list)
        return sorted(t for t in listed if t.startswith(self.prefix))

    def sample_once(self) -> None:
        for topic in self._topics():
            path = topic.replace("persistent://", "/admin/v2/persistent/")
            sent = now_us()
            try:
                stats = self._get(urllib.parse.quote(path) + "/stats")
            except OSError:  # the topic is being unloaded or deleted: no answer this round
                self.errors += 1
                continue
            answered = now_us()
            assert isinstance(stats, dict)
            self.samples.append(
                {"t_request_us": sent, "t_response_us": answered, "topic": topic, **compact(stats)}
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except OSError:
                self.errors += 1
            self._stop.wait(INTERVAL_S)

    def __enter__(self) -> StatsSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self.sample_once()  # the state the scenario left behind

    def write(self, path: Path) -> None:
        lines = (json.dumps(sample, sort_keys=True) for sample in self.samples)
        path.write_text("".join(line + "\n" for line in lines))
