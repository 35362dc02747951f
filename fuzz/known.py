"""Failures the campaign finds that pwcap has not fixed yet, each with its corpus input.

A failure matching one of these is reported but does not fail the short run; the
corpus test insists that each listed input still fails this way, so an entry is removed
in the same change that fixes it (the test says so when it passes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fuzz.batch import Failure


@dataclass(frozen=True)
class Open:
    """A known failure: a pattern over ``kind: detail``, what goes wrong, and the corpus
    inputs (in ``fuzz/corpus/captures``) that show it."""

    pattern: str
    about: str
    inputs: tuple[str, ...]

    def matches(self, failure: Failure) -> bool:
        return re.search(self.pattern, f"{failure.kind}: {failure.detail}") is not None


OPEN = (
    Open(
        r"^invariant: anomalies\.stream_offset = -1 is negative$",
        "Kafka 0.7: a stream whose ports were swapped (roles decided by a later record)"
        " reports a resync at stream offset -1",
        ("0000133-kafka07_derived_midstream.pcap",),
    ),
    Open(
        r"^invariant: 2 connections rows for conn_id \d+$",
        "a SYN record duplicated later in the capture opens a second connection with the"
        " same first time, so the same conn_id",
        ("0000318-kafka07_errors.pcap",),
    ),
    Open(
        r"^invariant: anomalies\.protocol = 'unknown' is not documented$",
        "a gap before content sniffing has decided the protocol is written with protocol"
        " `unknown`, although the connection is later decoded as Pulsar",
        ("0001465-pulsar_partitioned_port16650.pcap",),
    ),
)


def known(failure: Failure) -> Open | None:
    """The open problem a failure is an instance of, if any."""
    return next((entry for entry in OPEN if entry.matches(failure)), None)
