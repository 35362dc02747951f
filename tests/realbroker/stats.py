"""The broker's own account of a scenario: its admin API's topic statistics and its
OpenTelemetry consumer counters, sampled.

Every ``INTERVAL_S`` the sampler lists the namespace's topics, keeps the scenario's (by
name prefix) and asks the broker for each one's stats, then reads the per consumer
counters of those topics from the broker's Prometheus endpoint (acks, redeliveries and
messages out are counted there only: the admin API gives their rates). A sample keeps the
request's send and answer times, so a test knows the window in which the broker took its
numbers, and the fields that describe flow control, acknowledgement and redelivery (the
full answer is ~3 kB of mostly rates).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

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


# The broker's OpenTelemetry consumer metrics (their Prometheus family names), by the key a
# counters sample stores each under.
CONSUMER_METRICS = {
    "pulsar_broker_consumer_message_ack_count": "acks",
    "pulsar_broker_consumer_message_redeliver_count": "redelivered",
    "pulsar_broker_consumer_message_outgoing_count": "messages_out",
    "pulsar_broker_consumer_message_unack_count": "unacked",
    "pulsar_broker_consumer_permit_count": "permits",
}
CONSUMER_LABELS = {
    "pulsar_topic": "topic",
    "pulsar_subscription_name": "subscription",
    "pulsar_consumer_name": "consumer_name",
    "pulsar_consumer_id": "consumer_id",
}


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


def consumer_counters(text: str, prefix: str) -> list[dict]:
    """Each consumer's counters in a Prometheus exposition, for topics named ``prefix``*."""
    consumers: dict[tuple, dict] = {}
    for family in text_string_to_metric_families(text):
        key = CONSUMER_METRICS.get(family.name)
        if key is None:
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = {v: sample.labels.get(k, "") for k, v in CONSUMER_LABELS.items()}
            if not labels["topic"].startswith(prefix):
                continue
            labels["consumer_id"] = int(labels["consumer_id"])
            row = consumers.setdefault(tuple(labels.values()), labels)
            row[key] = int(sample.value)
    return [consumers[k] for k in sorted(consumers)]


class StatsSampler:
    """``with StatsSampler(admin_url, metrics_url, prefix) as sampler:`` samples until the
    block ends."""

    def __init__(self, admin_url: str, metrics_url: str, topic_prefix: str) -> None:
        self.admin_url = admin_url
        self.metrics_url = (
            metrics_url
            + "?"
            + "&".join(
                f"name[]={name}{suffix}" for name in CONSUMER_METRICS for suffix in ("", "_total")
            )
        )
        self.prefix = f"persistent://{NAMESPACE}/{topic_prefix}"
        self.samples: list[dict] = []
        self.counters: list[dict] = []
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
        sent = now_us()
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            text = response.read().decode()
        answered = now_us()
        consumers = consumer_counters(text, self.prefix)
        self.counters.append(
            {"t_request_us": sent, "t_response_us": answered, "consumers": consumers}
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

    def write(self, stats: Path, counters: Path) -> None:
        for path, samples in ((stats, self.samples), (counters, self.counters)):
            lines = (json.dumps(sample, sort_keys=True) for sample in samples)
            path.write_text("".join(line + "\n" for line in lines))
