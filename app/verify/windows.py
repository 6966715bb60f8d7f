"""Per-user window accounting over ``(user, slot, level, spend)`` rows, vectorized.

Used by both accountants: central rows are the slots a user's values were counted in (spend:
the audit's spend of that slot for the group), local rows are a device's answers (spend: the
request's eps for its group).

A user counted at level ``L`` must spend at most ``eps_L`` in every window of ``w_L`` slots that
holds one of its level-``L`` slots (whatever else the window holds). The worst such window
starts at one of the user's own rows, so the check looks at the window of ``w_L`` slots
starting at each row of a user that has level ``L`` somewhere: ``O(rows log rows)`` per level.
A user in two levels must have them more than a window apart (:func:`two_groups`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.verify.rules import Level, over

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Rows:
    """Rows sorted by ``(user, slot)``: user index, slot, level index, spend."""

    user: IntArray
    slot: IntArray
    level: IntArray
    spend: npt.NDArray[np.float64]

    @classmethod
    def of(
        cls, user: IntArray, slot: IntArray, level: IntArray, spend: npt.NDArray[np.float64]
    ) -> Rows:
        order = np.lexsort((slot, user))
        return cls(user[order], slot[order], level[order], spend[order])


@dataclass(frozen=True)
class Overspend:
    """A window of ``w`` slots from ``start`` where ``user`` spent ``spent`` > ``eps``."""

    user: int
    level: int
    start: int
    spent: float
    answers: int


def worst_windows(
    rows: Rows, levels: tuple[Level, ...]
) -> tuple[list[tuple[int, float]], list[Overspend]]:
    """Per level ``(users counted at it, worst window spend / eps)``, and every window start
    (one per user and level: its worst) that spends beyond the level's eps."""
    n = rows.user.shape[0]
    out: list[tuple[int, float]] = []
    bad: list[Overspend] = []
    if n == 0:
        return [(0, 0.0) for _ in levels], bad
    span = int(rows.slot.max() - rows.slot.min()) + max(lv.w for lv in levels) + 1
    key = rows.user * span + (rows.slot - rows.slot.min())
    cum = np.concatenate(([0.0], np.cumsum(rows.spend)))
    for li, level in enumerate(levels):
        at_level = rows.level == li
        users = np.unique(rows.user[at_level])
        if users.shape[0] == 0:
            out.append((0, 0.0))
            continue
        starts = np.flatnonzero(np.isin(rows.user, users))
        ends = np.searchsorted(key, key[starts] + level.w - 1, side="right")
        here = np.concatenate(([0], np.cumsum(at_level)))
        holds = here[ends] - here[starts] > 0
        starts, ends = starts[holds], ends[holds]
        spent = cum[ends] - cum[starts]
        out.append((int(users.shape[0]), float(spent.max() / level.eps)))
        beyond = over(spent, level.eps)
        seen: set[int] = set()
        for i in np.flatnonzero(beyond)[np.argsort(-spent[beyond], kind="stable")]:
            u = int(rows.user[starts[i]])
            if u not in seen:
                seen.add(u)
                answers = int(ends[i] - starts[i])
                bad.append(Overspend(u, li, int(rows.slot[starts[i]]), float(spent[i]), answers))
    return out, bad


def two_groups(rows: Rows, levels: tuple[Level, ...]) -> list[tuple[int, int, int, int, int]]:
    """``(user, slot_a, level_a, slot_b, level_b)`` for every pair of a user's consecutive
    rows at two levels closer than ``max(w_a, w_b)`` slots (one window of the wider level
    holds both). Consecutive pairs suffice: a violating pair further apart implies one."""
    if rows.user.shape[0] < 2:
        return []
    w = np.asarray([lv.w for lv in levels], dtype=np.int64)
    same_user = rows.user[1:] == rows.user[:-1]
    a, b = rows.level[:-1], rows.level[1:]
    close = rows.slot[1:] - rows.slot[:-1] < np.maximum(w[a], w[b])
    hits = np.flatnonzero(same_user & (a != b) & close)
    return [
        (int(rows.user[i]), int(rows.slot[i]), int(a[i]), int(rows.slot[i + 1]), int(b[i]))
        for i in hits
    ]
