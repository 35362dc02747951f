"""The ack_hole finding on frame tables built by hand: which batches acknowledged in part
(batch-index acknowledgement) the broker still holds, for the orders of individual and
cumulative ACKs the samples do not contain."""

from __future__ import annotations

from pwcap.jobs import redelivery
from pwcap.jobs.problems.acknowledgements import ack_holes
from pwcap.jobs.problems.base import Inputs
from tests.test_jobs_member_acks import batch_ack
from tests.test_jobs_units import delivery, table


def holes(spark, rows: list[dict]) -> list[dict]:
    frames = table(spark, "frames", rows)
    empty = {name: table(spark, name, []) for name in ("messages", "connections")}
    data = Inputs(
        frames, empty["messages"], empty["connections"], {"unacked": redelivery.unacked(frames)}
    )
    return [r.asDict() for r in ack_holes(data).collect()]


BATCHES = [delivery(100, entry, num_messages=5) for entry in range(3)]


def test_a_batch_acknowledged_in_part_behind_a_later_entry_is_a_hole(spark):
    rows = [
        *BATCHES,
        batch_ack(200, (0, [0b00100])),  # every member of entry 0 but member 2
        batch_ack(250, (1, None), (2, None)),
    ]
    (hole,) = holes(spark, rows)
    assert hole["count"] == 1
    assert "(1 messages; 1 of them batches acknowledged in part)" in hole["explanation"]
    assert "the oldest 7:0" in hole["explanation"]


def test_a_cumulative_ack_past_a_batch_acknowledged_in_part_takes_it_whole(spark):
    """The broker moves its mark-delete position past the batch: no member is left."""
    rows = [
        *BATCHES,
        batch_ack(200, (0, [0b00100])),
        batch_ack(250, (1, None)),
        batch_ack(300, (2, None), ack_type="Cumulative"),
    ]
    assert holes(spark, rows) == []


def test_a_cumulative_ack_leaving_members_of_its_entry_owed_holds_only_that_entry(spark):
    """A cumulative ACK of a batch's member (the Java client's cumulative batch-index ack)
    takes the entries before it whole and its own entry in part: with a later entry
    acknowledged individually, that entry is the hole."""
    rows = [
        *BATCHES,
        batch_ack(200, (0, [0b00100])),
        batch_ack(250, (1, [0b11000]), ack_type="Cumulative"),  # members 0-2 of entry 1
        batch_ack(300, (2, None)),
    ]
    (hole,) = holes(spark, rows)
    assert hole["count"] == 1
    assert "the oldest 7:1" in hole["explanation"]
