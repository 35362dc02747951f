"""The real-broker capture scenarios: which client runs which scenario on which broker."""

from __future__ import annotations

from dataclasses import dataclass

JAVA = "java"
GO = "go"
PYTHON = "python"


@dataclass(frozen=True)
class RealScenario:
    client: str  # java, go or python
    scenario: str  # the name the client program knows it by
    description: str
    broker_config: str = "default"  # a key of broker.CONFIGS
    # A broker of its own, started cold: the connections the broker opens to itself (its
    # transaction buffer client, its policies reader) open inside the capture, whole.
    own_broker: bool = False

    @property
    def broker_group(self) -> tuple[str, str]:
        """Scenarios with the same group share one broker start."""
        return (self.broker_config, self.name if self.own_broker else "")

    @property
    def name(self) -> str:
        return f"realpulsar_{self.client}_{self.scenario}"

    @property
    def topic_prefix(self) -> str:
        return f"{self.client}-{self.scenario}".replace("_", "-")


SCENARIOS = [
    RealScenario(
        JAVA,
        "key_shared",
        "Key_Shared: auto-split with a consumer joining and leaving; sticky hash ranges",
    ),
    RealScenario(
        JAVA,
        "key_shared_sticky",
        "Key_Shared sticky hash ranges: a consumer joins mid-stream, another leaves",
    ),
    RealScenario(
        JAVA,
        "redelivery",
        "ack timeout and negative-ack redelivery by the broker; a dead-letter topic",
    ),
    RealScenario(
        JAVA,
        "batch_index_ack",
        "batch-index acknowledgements (ack_set) and redelivery of the rest of two batches",
    ),
    RealScenario(JAVA, "delayed", "delayed delivery (deliver_at_time) on a Shared subscription"),
    RealScenario(JAVA, "chunked", "70 kB messages in 20 kB chunks"),
    RealScenario(
        JAVA,
        "transaction",
        "consume-transform-produce in transactions, one committed, one aborted",
        broker_config="transactions",
        own_broker=True,
    ),
    RealScenario(JAVA, "pattern", "a pattern subscription fed by the broker's topic-list watcher"),
    RealScenario(JAVA, "schema", "an Avro schema; an AUTO_CONSUME consumer fetches it"),
    RealScenario(JAVA, "unload", "the topic unloaded by the admin API with clients connected"),
    RealScenario(JAVA, "slow_consumer", "a 10-message receiver queue behind a 60-message backlog"),
    RealScenario(
        JAVA,
        "epoch",
        "a Failover consumer asks for everything unacknowledged again: a new consumer epoch",
    ),
    RealScenario(
        JAVA,
        "entry_metadata",
        "broker entry metadata (broker timestamp and index interceptors) exposed to the consumer",
        broker_config="entry_metadata",
    ),
    RealScenario(GO, "key_shared", "Key_Shared, key-based batches; a consumer joins and leaves"),
    RealScenario(GO, "redelivery", "negative acks until the dead-letter topic, and its reader"),
    RealScenario(GO, "batch_index_ack", "batch-index acknowledgements and the ack_set redelivery"),
    RealScenario(GO, "chunked", "70 kB messages in 20 kB chunks"),
    RealScenario(
        GO,
        "transaction",
        "transactions, one committed, one aborted",
        broker_config="transactions",
        own_broker=True,
    ),
    RealScenario(GO, "slow_consumer", "a 10-message receiver queue behind a 60-message backlog"),
    RealScenario(
        PYTHON,
        "redelivery",
        "batch-index acks and negative acks on a Shared subscription: ack_set redeliveries",
    ),
    RealScenario(PYTHON, "slow_consumer", "a 5-message receiver queue behind a 30-message backlog"),
    RealScenario(
        PYTHON,
        "ack_hole",
        "batch-index acks leaving one member of each of two batches unacknowledged",
    ),
    RealScenario(
        PYTHON,
        "key_shared_stall",
        "Key_Shared STICKY halves: a slow low half stalls its keys while the high half idles",
    ),
    RealScenario(
        PYTHON,
        "epoch",
        "a Failover consumer asks for every unacknowledged message again (naming none)",
    ),
]

BY_NAME = {s.name: s for s in SCENARIOS}
