"""A recording :class:`pwcap.decode.api.RowSink`, for tests of either decoder."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RecordingSink:
    """A RowSink that keeps every row, for assertions (two compare equal by their rows)."""

    frames: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    anomalies: list[dict] = field(default_factory=list)

    def frame(self, row: dict) -> None:
        self.frames.append(row)

    def message(self, row: dict) -> None:
        self.messages.append(row)

    def anomaly(self, row: dict) -> None:
        self.anomalies.append(row)

    def kinds(self) -> list[str]:
        return [a["kind"] for a in self.anomalies]

    def commands(self) -> list[str | None]:
        return [f["command"] for f in self.frames]
