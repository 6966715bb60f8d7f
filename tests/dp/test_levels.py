"""The core's gap rule (:mod:`app.dp.levels`) against the verifier's own statement of it
(:mod:`app.verify.rules`, written apart on purpose) and against the device's sit-out."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.client.device import Device, Enrollment
from app.dp.levels import (
    Change,
    History,
    HistoryError,
    LevelHistories,
    level_at,
    settled_level,
    sit_out,
)
from app.verify import rules

NAMES = ("strict", "mid", "loose")


@dataclass(frozen=True)
class Rule:
    """A stream's levels as :class:`~app.dp.levels.LevelRule` (slots of ``slot_s`` seconds)."""

    level_widths: tuple[int, ...]
    default_level: int
    slot_s: float = 10.0

    def level_index(self, name: str) -> int | None:
        return NAMES.index(name) if name in NAMES[: len(self.level_widths)] else None

    def slot_of(self, at: float) -> int:
        return rules.slot_of(at, self.slot_s)


widths = st.lists(st.integers(1, 6), min_size=1, max_size=3)
level_names = st.sampled_from((*NAMES, None, "junk"))
steps = st.lists(st.tuples(st.floats(0.0, 40.0), level_names), max_size=8)


@settings(max_examples=300, deadline=None)
@given(widths, st.data(), steps, st.booleans())
def test_core_agrees_with_the_verifiers_statement(
    ws: list[int], data: st.DataObject, raw: list[tuple[float, str | None]], truncated: bool
) -> None:
    rule = Rule(tuple(ws), data.draw(st.integers(0, len(ws) - 1)))
    store = LevelHistories(NAMES)
    at = 0.0
    for dt, name in raw:  # times in order, each change to another level, as stored
        at += dt
        store.change("u", name, at, 0.0)
    history = store.history("u")
    verified = None
    if history is not None:
        changes = tuple((c.at, c.level) for c in history.changes)
        verified = rules.History(changes, truncated)
        if truncated:
            store.restore("u", History(history.changes, truncated=True))
    levels = tuple(rules.Level(n, w, 1.0) for n, w in zip(NAMES, ws, strict=False))
    for slot in range(-1, int(at / rule.slot_s) + 2 * max(ws) + 3):
        expected = rules.group_of(verified, slot, levels, rule.default_level, rule.slot_s)
        assert store.group(rule, "u", slot) == expected, slot
        settled = store.settled(rule, "u", slot)
        if settled is not None:  # settled: the same level in this slot and every later one
            later = range(slot, slot + 2 * max(ws) + 2)
            assert all(
                rules.group_of(verified, s, levels, rule.default_level, rule.slot_s) == settled
                for s in later
            )


@given(st.integers(1, 8), st.integers(1, 8), st.integers(0, 50))
def test_device_sits_out_the_cores_gap(w_old: int, w_new: int, slot: int) -> None:
    device = Device(Enrollment(user=0, w=w_old, eps=1.0, slot_s=1.0, origin_s=0.0))
    device.change_level(1, w_new, 2.0, slot)
    assert device.quiet_until == slot + sit_out(w_old, w_new)
    assert [
        level_at(s, 0, [(slot, 1)], (w_old, w_new)) for s in (slot - 1, device.quiet_until)
    ] == [0, 1]
    assert level_at(device.quiet_until - 1, 0, [(slot, 1)], (w_old, w_new)) is None


def test_settled_only_after_every_gap() -> None:
    # Two changes: to level 1 at slot 10 (gap 5), back to 0 at slot 11 (gap 5 again).
    changes = [(10, 1), (11, 0)]
    assert [settled_level(s, 0, changes, (5, 3)) for s in (14, 15, 16)] == [None, None, 0]
    assert level_at(9, None, changes, (5, 3)) is None  # before a truncated history's oldest


def test_history_refuses_what_to_dict_could_not_write() -> None:
    ok = History([Change(1.0, "a"), Change(2.0, None)], truncated=True)
    assert History.from_dict(ok.to_dict()) == ok
    for bad in ({"changes": [[2.0, "a"], [1.0, "b"]]}, {"changes": [[1.0, "a"], [2.0, "a"]]}, []):
        with pytest.raises(HistoryError):
            History.from_dict(bad)
