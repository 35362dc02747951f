"""jobs/acks.py ``member_acks`` on frame tables built by hand: the batch members each
individual ack acknowledges, as the broker counts them (an ack_set's cleared bits
intersected with the members still owed), for the ack_set styles the real clients send."""

from __future__ import annotations

from typing import Any

from pwcap.jobs import acks
from tests.test_jobs_units import SUB, delivery, frame, table, us


def batch_ack(when: int, *ids: tuple[int, list[int] | None], ack_type: str = "Individual"):
    """An ACK of entries of ledger 7, each with its ack_set's words (None: none), and the
    members each set leaves owed (its set bits: bit n of word w is member 64 w + n)."""
    message_ids: list[dict[str, Any]] = []
    ack_sets: list[dict[str, int]] = []
    owed: list[dict[str, int]] = []
    for place, (entry, ack_set) in enumerate(ids):
        message_ids.append({"ledger_id": 7, "entry_id": entry, "partition": -1, "batch_index": -1})
        for word, bits in enumerate(ack_set or []):
            ack_sets.append({"id": place, "word": word, "bits": bits})
            owed += [
                {"ledger_id": 7, "entry_id": entry, "partition": -1, "batch_index": 64 * word + n}
                for n in range(64)
                if bits >> n & 1
            ]
    return frame(
        when,
        "ACK",
        "c2b",
        consumer_id=0,
        ack_type=ack_type,
        ledger_id=7,
        entry_id=ids[0][0],
        num_message_ids=len(ids),
        message_ids=message_ids,
        ack_sets=ack_sets or None,
        unacked_in_batch=owed,
        **SUB,
    )


def members(spark, rows: list[dict]) -> list[tuple[int, int, int]]:
    found = acks.member_acks(table(spark, "frames", rows)).collect()
    return sorted((us(r.ts), r.entry_id, r.members) for r in found)


def test_every_member_acked_so_far_counts_only_the_new_ones(spark):
    """The Java and Go clients' sets: every member acknowledged so far (set bit: owed)."""
    owed_after = (0b1010101010, 0b0010001000)
    rows = [
        delivery(100, 0, num_messages=10),
        batch_ack(200, (0, [owed_after[0]])),  # 0, 2, 4, 6, 8 acknowledged
        delivery(
            300,
            0,
            num_messages=10,
            acked_in_batch=5,
            ack_sets=[{"id": 0, "word": 0, "bits": owed_after[0]}],
        ),
        batch_ack(400, (0, [owed_after[1]])),  # and 1, 5, 9
        batch_ack(500, (0, None)),  # the whole entry: 3 and 7 were left
    ]
    assert members(spark, rows) == [(200, 0, 5), (400, 0, 3), (500, 0, 2)]


def test_the_members_of_this_ack_only_count_each_member_once(spark):
    """The C++ client's sets: one ACK names the entry once per member acknowledged, with
    the same set; a later one clears the member left."""
    rows = [
        delivery(100, 0, num_messages=5),
        batch_ack(200, (0, [0b10001]), (0, [0b10001]), (0, [0b10001])),
        batch_ack(300, (0, [0b01110])),
        batch_ack(400, (0, [0b11110])),  # acknowledged already
    ]
    assert members(spark, rows) == [(200, 0, 0), (200, 0, 0), (200, 0, 3), (300, 0, 2), (400, 0, 0)]


def test_an_entry_delivered_again_is_owed_again(spark):
    """After a transaction's acks are aborted the broker delivers the entry again, and the
    plain ack that follows acknowledges it for good."""
    rows = [
        delivery(100, 0),
        batch_ack(200, (0, None)),
        delivery(300, 0, redelivery_count=1),
        batch_ack(400, (0, None)),
        batch_ack(500, (0, None)),
    ]
    assert members(spark, rows) == [(200, 0, 1), (400, 0, 1), (500, 0, 0)]


def test_cumulative_acks_and_entries_never_delivered_are_left_out(spark):
    rows = [
        delivery(100, 0),
        batch_ack(200, (0, None), ack_type="Cumulative"),
        batch_ack(300, (5, None)),
    ]
    assert members(spark, rows) == []


def test_a_batch_is_answered_by_the_ack_of_its_last_member_owed(spark):
    """``answered_deliveries``: an ack_set that leaves members owed answers nothing; the
    ACK that acknowledges the last one does, in either client's style; a batch with a
    member never acknowledged stays unanswered, for ``unanswered_last_deliveries`` too."""
    rows = [
        delivery(100, 0, num_messages=5),  # the Java and Go clients' sets
        batch_ack(200, (0, [0b10101])),
        batch_ack(300, (0, [0b00001])),
        batch_ack(400, (0, [0b00000])),
        delivery(100, 1, num_messages=3),  # the C++ client's: this ACK's members
        batch_ack(250, (1, [0b110]), (2, None)),
        batch_ack(350, (1, [0b101]), (1, [0b011])),
        delivery(100, 2, num_messages=1),  # acknowledged whole at 250
        delivery(100, 3, num_messages=4),  # one member never acknowledged
        batch_ack(450, (3, [0b0100]), (3, [0b0100]), (3, [0b0100])),
    ]
    frames = table(spark, "frames", rows)
    answered = {r.entry_id: us(r.ack_ts) for r in acks.answered_deliveries(frames).collect()}
    assert answered == {0: 400, 1: 350, 2: 250, 3: None}
    holes = acks.unanswered_last_deliveries(frames).collect()
    assert [r.entry_id for r in holes] == [3]


def test_a_cumulative_ack_of_a_batch_member_answers_the_entries_before_it(spark):
    """A cumulative ACK with an ack_set that leaves members of its entry owed (the Java
    client's cumulative batch-index ack of a member) acknowledges the entries before that
    one only; the entry is answered by the cumulative ACK that takes it whole."""
    rows = [
        delivery(100, 0, num_messages=5),
        delivery(100, 1, num_messages=5),
        delivery(100, 2, num_messages=5),
        batch_ack(200, (1, [0b11000]), ack_type="Cumulative"),  # 0, 1 and 0-2 of 1
        batch_ack(300, (1, [0b00000]), ack_type="Cumulative"),  # the rest of 1
    ]
    frames = table(spark, "frames", rows)
    answered = {r.entry_id: us(r.ack_ts) for r in acks.answered_deliveries(frames).collect()}
    assert answered == {0: 200, 1: 300, 2: None}
    assert [r.entry_id for r in acks.unanswered_last_deliveries(frames).collect()] == [2]
    early = table(spark, "frames", rows[:4])
    assert sorted(r.entry_id for r in acks.unanswered_last_deliveries(early).collect()) == [1, 2]
