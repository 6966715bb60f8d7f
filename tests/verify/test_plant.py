"""``verify`` finds each known defect class planted on hand-built topic contents, and nothing on
a clean run (no broker: the accountant is pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.stream.collect.partitioning import partition_for
from app.stream.internal import Partial
from app.verify import judge
from app.verify.report import to_dict, to_text
from tests.verify.build import CENTRAL, LOCAL, PARTITIONS, Topics, reference_partials, stream_of

SLOTS = range(100, 110)
USERS = [f"u{i}" for i in range(8)]
CHANGE_AT = 1005.0
"""u1 asks for `loose` in slot 100: effective at 101, sits out 101..105, loose from 106."""


def central(
    tmp_path: Path,
    late: bool = False,
    histories: dict[str, list[tuple[float, str | None]]] | None = None,
    asked: list[tuple[str, str | None, float]] | None = None,
) -> tuple[Topics, dict]:
    """A clean central run: every user one value per slot, u1 moves to `loose` (``histories``
    and ``asked``: the users' level records and preference records, if others)."""
    stream = stream_of(tmp_path, CENTRAL)
    t = Topics(stream)
    histories = {"u1": [(CHANGE_AT, "loose")]} if histories is None else histories
    for user, level, at in [("u1", "loose", CHANGE_AT)] if asked is None else asked:
        t.preference(user, level, at)
    for user, changes in histories.items():
        t.levels(user, changes)
    t.read_preferences(CHANGE_AT + 1)
    events = []
    for slot in SLOTS:
        for i, user in enumerate(USERS):
            ts = slot * 10 + 1 + i * 0.5
            events.append((user, ts, (i * 7 + slot) % 3))
            t.event(user, ts, (i * 7 + slot) % 3)
            t.event(user, ts + 0.1, (i + 1) % 3)  # a second value in the slot: not counted
    if late:  # a value appended after its slot's partial was sent: not released, no violation
        t.event("u9", 1051.0, 0, appended=1200.0)
    parts = reference_partials(stream, events, histories, SLOTS)
    for slot in SLOTS:
        hist = [0.0] * stream.d
        for p in range(PARTITIONS):
            counts = parts[slot, p]
            t.partial(slot, p, counts, sent=slot * 10 + 11.5)
            for g in range(len(stream.levels)):
                for v in range(stream.d):
                    hist[v] += counts[g * stream.d + v]
        t.release(slot, hist, at=slot * 10 + 12.0)
        t.audit(slot, {"strict": 1.0 / 5, "loose": 4.0 / 3})
    return t, parts


def unique_cell(t: Topics, parts: dict, slot: int, user: str) -> tuple[int, int]:
    """``(partition, value)`` of ``user``'s value in ``slot`` (checked: nobody else's there)."""
    stream = t.stream
    i = USERS.index(user)
    v = (i * 7 + slot) % 3
    p = partition_for(user.encode(), PARTITIONS)
    same = [
        u
        for j, u in enumerate(USERS)
        if partition_for(u.encode(), PARTITIONS) == p and (j * 7 + slot) % 3 == v
    ]
    assert same == [user], "the scenario keeps this cell to one user"
    assert parts[slot, p][stream.default_level * stream.d + v] >= 1
    return p, v


def replace_partial(t: Topics, slot: int, p: int, counts: list[int]) -> None:
    """Put ``counts`` first for ``(slot, p)``: the release agent keeps the first partial."""
    t.snap.partials = [m for m in t.snap.partials if not _is(m, slot, p)]
    before = len(t.snap.partials)
    t.partial(slot, p, counts, sent=slot * 10 + 11.5)
    t.snap.partials.insert(0, t.snap.partials.pop(before))


def _is(m, slot: int, p: int) -> bool:
    from app.stream.records import unpack

    rec = unpack(m.value)
    return rec["slot"] == slot and rec["partition"] == p


def test_a_clean_run_has_no_violation(tmp_path: Path):
    t, _ = central(tmp_path, late=True)
    # byte-identical duplicates of a release and replayed partials are allowed
    t.snap.releases.append(t.snap.releases[3])
    t.partial(104, 0, [9] * 6, sent=2000.0)  # a replay after the first: ignored
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict, show_users=True)
    assert verdict.slots == (SLOTS[0], SLOTS[-1], len(SLOTS))
    gap = 5  # u1 sits out slots 101..105
    assert verdict.released == len(USERS) * len(SLOTS) - gap
    assert verdict.not_released == {"level_change": gap, "late": 1}
    strict, loose = verdict.levels
    assert strict.users == len(USERS) + 1 and loose.users == 1  # u9: late, still priced
    assert strict.worst == pytest.approx(1.0) and loose.worst == pytest.approx(1.0)
    assert "no violation" in to_text(verdict)


def test_partials_the_release_agent_refuses_are_skipped_and_counted(tmp_path: Path):
    """A forged partial for a partition the topic lacks, or for a slot far ahead of its own
    time, never reached a release (app/stream/release/guard.py): not a violation, but said."""
    t, _ = central(tmp_path)
    forged = Partial(t.stream.id, 104, 99, PARTITIONS, [9] * 6).encode()
    t.snap.partials.insert(0, t._msg("partials", 0, 1_000, b"s", forged))
    t.partial(104, 0, [9] * 6, sent=104 * t.stream.slot_s - 3600.0)  # an hour early
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict, show_users=True)
    assert verdict.refused == {"refused_partition": 1, "refused_future": 1}
    assert "refused by the release agent" in to_text(verdict)


def test_a_value_counted_in_the_wrong_group(tmp_path: Path):
    t, parts = central(tmp_path)
    d = t.stream.d
    p, v = unique_cell(t, parts, 103, "u2")
    counts = list(parts[103, p])
    counts[v] -= 1  # out of strict ...
    counts[d + v] += 1  # ... into loose
    replace_partial(t, 103, p, counts)
    verdict = judge(t.stream, t.snap)
    # u2 (strict) counted loose in slot 103: one cell too many; u2 then sits in two groups
    # next to 103 (102 -> 103 and 103 -> 104), and its strict window over 103 holds a loose
    # spend (1/5 * 4 + 4/3 > 1)
    assert verdict.counts == {"wrong_group": 1, "two_groups": 2, "overspend": 1}, to_text(verdict)
    assert verdict.not_released["dropped"] == 1  # its strict value never reached a release
    found = [x for x in verdict.violations if x.kind == "wrong_group"]
    assert found[0].slots == (103,) and found[0].users == ("u2",)
    assert "u2" not in to_text(verdict)
    assert "u2" in to_text(verdict, show_users=True)
    assert "user_ids" not in to_dict(verdict)["findings"][0]


def test_a_user_in_two_groups_within_one_window(tmp_path: Path):
    t, parts = central(tmp_path)
    d = t.stream.d
    p, v = unique_cell(t, parts, 103, "u2")
    counts = list(parts[103, p])
    counts[v] -= 1
    counts[d + v] += 1
    replace_partial(t, 103, p, counts)
    verdict = judge(t.stream, t.snap)
    assert {"two_groups", "overspend"} <= verdict.kinds(), to_text(verdict)
    pair = next(x for x in verdict.violations if x.kind == "two_groups")
    assert pair.users == ("u2",) and 103 in pair.slots


def test_a_level_change_without_gap(tmp_path: Path):
    t, parts = central(tmp_path)
    d = t.stream.d
    p = partition_for(b"u1", PARTITIONS)
    v = (1 * 7 + 101) % 3
    counts = list(parts[101, p])
    counts[d + v] += 1  # u1 counted as loose at once, in its gap's first slot
    replace_partial(t, 101, p, counts)
    verdict = judge(t.stream, t.snap)
    # one loose value in u1's gap; u1 strict in 100 then loose in 101: two groups, and its
    # strict window from 100 spends 1/5 + 4/3 > 1
    assert verdict.counts == {"no_gap": 1, "two_groups": 1, "overspend": 1}, to_text(verdict)
    assert "u1" in next(x for x in verdict.violations if x.kind == "no_gap").users


def test_a_slot_released_twice_with_different_bytes(tmp_path: Path):
    t, _ = central(tmp_path)
    t.release(104, [1.0, 2.0, 3.0], at=1100.0)
    verdict = judge(t.stream, t.snap)
    assert verdict.kinds() == {"release_differs"}, to_text(verdict)
    assert verdict.violations[0].slots == (104,)


def test_a_missing_release(tmp_path: Path):
    t, _ = central(tmp_path)
    t.snap.releases = [m for i, m in enumerate(t.snap.releases) if i != 4]
    verdict = judge(t.stream, t.snap)
    assert verdict.kinds() == {"release_missing"}, to_text(verdict)
    assert verdict.not_released["unreleased"] > 0


def test_a_backdated_level_change(tmp_path: Path):
    """u2's history says `loose` from 1001 (counted so: the partials follow it), asked at 1002."""
    histories = {"u1": [(CHANGE_AT, "loose")], "u2": [(1001.0, "loose")]}
    asked = [("u1", "loose", CHANGE_AT), ("u2", "loose", 1002.0)]
    t, _ = central(tmp_path, histories=histories, asked=asked)
    verdict = judge(t.stream, t.snap)
    assert verdict.counts == {"level_backdated": 1}, to_text(verdict)
    assert verdict.violations[0].users == ("u2",)


def test_a_missing_level_change(tmp_path: Path):
    t, _ = central(tmp_path)
    t.preference("u4", "loose", 1010.0)  # never applied, though partials came long after
    assert judge(t.stream, t.snap).ok  # not owed before the worker says it read it
    t.read_preferences(1011.0)
    verdict = judge(t.stream, t.snap)
    assert verdict.counts == {"level_missing": 1}, to_text(verdict)
    assert verdict.violations[0].users == ("u4",)


def test_a_preference_read_late_is_no_violation(tmp_path: Path):
    t, _ = central(tmp_path)
    t.preference("u4", "loose", 1095.0)  # the last partials came 10 s after it
    t.read_preferences(1096.0)
    assert judge(t.stream, t.snap).ok


def test_since_judges_only_later_slots(tmp_path: Path):
    t, parts = central(tmp_path)
    p, v = unique_cell(t, parts, 103, "u2")
    counts = list(parts[103, p])
    counts[v] += 1
    replace_partial(t, 103, p, counts)
    assert judge(t.stream, t.snap).counts == {"overcount": 1}
    t.snap.since = 1040.0
    assert judge(t.stream, t.snap).ok


def local(tmp_path: Path, answers: dict[int, list[int]]) -> Topics:
    """A local run: publication requests t=1..8 at eps 2 (w=3); ``answers``: user -> slots."""
    stream = stream_of(tmp_path, LOCAL)
    t = Topics(stream)
    for slot in range(1, 9):
        t.request(slot, "publication", [2.0])
        t.release(1000 + slot, [0.0, 0.0], at=2000.0 + slot)
    for user, slots in answers.items():
        for slot in slots:
            t.report(user, slot, "publication", [1])
    return t


def test_devices_within_their_window(tmp_path: Path):
    t = local(tmp_path, {7: [1, 4, 7], 8: [2, 5, 8], 9: [3]})
    t.report(9, 3, "publication", [1])  # the same report again: one answer
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    assert verdict.released == 7
    assert verdict.levels[0].worst == pytest.approx(1.0)


def test_a_device_answering_twice_in_its_window(tmp_path: Path):
    t = local(tmp_path, {7: [1, 4], 8: [2, 4]})
    verdict = judge(t.stream, t.snap)
    assert verdict.kinds() == {"device_window"}, to_text(verdict)
    found = verdict.violations[0]
    assert found.slots == (2,) and found.users == ("8",)
    assert verdict.levels[0].worst == pytest.approx(2.0)


def test_a_rebalance_that_resets_levels(tmp_path: Path):
    """Issue 21 item 1: a worker that forgot a partition's level histories counts its `loose`
    user at the default level at once, with no gap, then at `loose` again."""
    t, parts = central(tmp_path)
    d = t.stream.d
    p = partition_for(b"u1", PARTITIONS)
    for slot in (107, 108):
        v = (1 * 7 + slot) % 3
        counts = list(parts[slot, p])
        counts[d + v] -= 1  # out of loose ...
        counts[v] += 1  # ... into the default level
        replace_partial(t, slot, p, counts)
    verdict = judge(t.stream, t.snap)
    # two cells moved: u1's rows (the loose ones the rules expect, the default ones the worker
    # counted) alternate 107 L, 107 D, 108 L, 108 D, 109 L: four pairs of two groups; both
    # levels' windows mix a loose and a default spend
    assert verdict.counts == {"wrong_group": 2, "two_groups": 4, "overspend": 2}, to_text(verdict)
    assert {x.slots for x in verdict.violations if x.kind == "wrong_group"} == {(107,), (108,)}
