"""A recording :class:`pwcap.decode.api.RowSink`, for tests of either decoder."""

from __future__ import annotations

from dataclasses import dataclass, field

from pwcap.decode.api import RowSink


@dataclass
class RecordingSink:
    """Keeps every row built in its :attr:`rows`, as a dict of every column (None: null),
    for assertions (two compare equal by their rows)."""

    frames: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    anomalies: list[dict] = field(default_factory=list)
    rows: RowSink = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.rows = RowSink.calling(self.frames.append, self.messages.append, self.anomalies.append)

    def kinds(self) -> list[str]:
        return [a["kind"] for a in self.anomalies]

    def commands(self) -> list[str | None]:
        return [f["command"] for f in self.frames]
