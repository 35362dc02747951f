"""A time axis with the idle hours cut out.

A dataset often holds captures recorded hours apart; on a plain time axis their points
crowd into a few columns with blank hours between. Here time runs only while some capture
was recording: the stretches where none was are cut (drawn as a break), and charts bin
and place points by their position on this shortened axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

MAX_SEGMENTS = 8  # breaks in one axis at most: the longest idle stretches are cut
IDLE = 0.05  # an idle stretch is cut when longer than this fraction of the recorded time
MIN_SHARE = 0.04  # of the axis that even the shortest recorded stretch is given


class BrokenAxis:
    """Segments of recorded time, each with its position on the shortened axis."""

    def __init__(self, spans: Sequence[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        recorded = sum(end - start for start, end in merged) or 1
        gaps = sorted(
            (merged[i + 1][0] - merged[i][1], i) for i in range(len(merged) - 1)
        )  # (idle length, the segment it follows)
        cut = {i for length, i in gaps[-(MAX_SEGMENTS - 1) :] if length > IDLE * recorded}
        stretches: list[tuple[int, int]] = []  # the recorded stretches between cuts
        start = merged[0][0] if merged else 0
        for i, (_, end) in enumerate(merged):
            if i in cut or i == len(merged) - 1:
                stretches.append((start, end))
                if i + 1 < len(merged):
                    start = merged[i + 1][0]
        # A short stretch still gets room enough to see its points.
        floor = MIN_SHARE * sum(end - start for start, end in stretches)
        self.segments: list[tuple[int, int, float, float]] = []  # start, end, place, width
        place = 0.0
        for start, end in stretches:
            width = max(float(end - start), floor, 1.0)
            self.segments.append((start, end, place, width))
            place += width
        self.length = max(place, 1.0)

    def positions(self, times: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
        """Each time's place on the axis (0 to ``length``); null outside it."""
        placed = pa.nulls(len(times), pa.float64())
        for start, end, place, width in self.segments:
            inside = pc.and_(pc.greater_equal(times, start), pc.less_equal(times, end))
            scale = width / max(end - start, 1)
            offset = pc.multiply(pc.cast(pc.subtract(times, start), pa.float64()), scale)
            placed = pc.if_else(inside, pc.add(offset, place), placed)
        return pa.chunked_array([placed]) if isinstance(placed, pa.Array) else placed

    def time_at(self, position: float) -> float:
        """The capture time (µs) at a place on the axis."""
        for start, end, place, width in self.segments:
            if position <= place + width:
                return start + max(position - place, 0) * (end - start) / width
        return float(self.segments[-1][1]) if self.segments else position
