"""``app.tools.capacity.recovery.recovery_times``: when releases count as back after a kill."""

from __future__ import annotations

from app.tools.capacity.recovery import BACK_WITHIN_SLOTS, recovery_times


def test_a_release_before_the_kill_or_too_late_for_its_slot_does_not_count():
    slot_s, grace_s = 2.0, 0.5
    kill = 100.0
    due = lambda s: (s + 1) * slot_s + grace_s  # noqa: E731 - the slot clock, written out
    arrived = {
        48: 99.0,  # before the kill
        49: kill + 9.0,  # slot 49 was due at 100.5: 8.5 s late, more than 2 slots
        55: due(55) + BACK_WITHIN_SLOTS * slot_s + 0.01,  # just over the bound
        56: due(56) + BACK_WITHIN_SLOTS * slot_s,  # on the bound: back
    }
    assert recovery_times([kill], arrived, slot_s, grace_s) == [arrived[56] - kill]


def test_a_kill_after_which_no_release_comes_back_is_none():
    arrived = {10: 5.0, 11: 30.0}  # slot 11 due at 12.3 arrives 17.7 s late
    assert recovery_times([6.0, 40.0], arrived, slot_s=1.0, grace_s=0.3) == [None, None]


def test_each_kill_is_timed_from_its_own_moment():
    arrived = {20: 21.4, 30: 31.5, 31: 32.3}
    assert recovery_times([21.0, 31.0], arrived, slot_s=1.0, grace_s=0.3) == [0.4, 0.5]
