"""The report's time axis cuts the hours no capture recorded, so two captures taken hours
apart each fill part of the chart instead of two dots at its edges."""

from __future__ import annotations

import pyarrow as pa

from pwcap.report.timeaxis import MIN_SHARE, BrokenAxis

SECOND = 1_000_000
HOUR = 3600 * SECOND


def test_captures_hours_apart_share_the_axis_by_their_recorded_time():
    axis = BrokenAxis([(0, 60 * SECOND), (3 * HOUR, 3 * HOUR + 60 * SECOND)])
    assert axis.length == 120 * SECOND  # three idle hours cut
    placed = axis.positions(pa.array([0, 30 * SECOND, 3 * HOUR, 3 * HOUR + 60 * SECOND]))
    assert placed.to_pylist() == [0, 30 * SECOND, 60 * SECOND, 120 * SECOND]
    assert axis.time_at(90 * SECOND) == 3 * HOUR + 30 * SECOND


def test_a_short_capture_still_gets_room_and_times_outside_are_left_out():
    axis = BrokenAxis([(0, 100 * SECOND), (HOUR, HOUR + SECOND)])
    (_, _, place, width) = axis.segments[1]
    assert width == MIN_SHARE * 101 * SECOND and place == 100 * SECOND
    assert axis.positions(pa.array([HOUR // 2])).to_pylist() == [None]


def test_overlapping_and_nearby_captures_are_one_stretch():
    """Rotated files follow each other: a second's pause is no break."""
    axis = BrokenAxis([(0, 50 * SECOND), (40 * SECOND, 100 * SECOND), (101 * SECOND, 200 * SECOND)])
    assert [(s, e) for s, e, _, _ in axis.segments] == [(0, 200 * SECOND)]
