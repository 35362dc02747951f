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


OPEN: tuple[Open, ...] = ()


def known(failure: Failure) -> Open | None:
    """The open problem a failure is an instance of, if any."""
    return next((entry for entry in OPEN if entry.matches(failure)), None)
