"""The slot and level rules, written again on their own, so that the worker cannot vouch for itself.

Nothing here imports the worker's collect, preferences or release classes, nor the core's
statement of the level gap rule (:mod:`app.dp.levels`, which the service and the devices share):
these few lines restate ``docs/design.md`` (Data flow) and ``topics/*.yaml`` from the text *on
purpose*, a second statement written apart from the first, so that a slip in the rule the worker
runs shows as a disagreement instead of being vouched for by the same code. The accountant
(:mod:`app.verify.account`) compares what the worker did with them, and
``tests/dp/test_levels.py`` holds the two statements equal on generated histories.

- **Slot**: slot ``s`` of a stream covers ``[s * slot_s, (s + 1) * slot_s)``, so an event at
  time ``ts`` falls in ``floor(ts / slot_s)``.
- **Level history**: a user's changes ``(at, level)``, oldest first, as the internal ``levels``
  topic stores them (``level`` None, or a name the stream does not offer, is the default level).
  A user with no history is at the stream's default level. A change takes effect at
  ``slot_of(at) + 1``; from there the user sits out ``max(w_old, w_new)`` slots (not counted),
  then counts at the new level. A change to the level the user already has changes nothing. A
  truncated history (older changes dropped) counts the user nowhere before its oldest change,
  and that change's gap is ``max`` of every level's ``w``.
- **Windows**: two slots ``a < b`` lie in one window of ``w`` slots iff ``b - a < w``.

>>> levels = (Level("strict", 5, 1.0), Level("loose", 3, 4.0))
>>> h = History(((10.0, "loose"),))
>>> [group_of(h, s, levels, default=0, slot_s=1.0) for s in (10, 11, 15, 16)]
[0, None, None, 1]
>>> slot_of(59.999, 60.0), slot_of(60.0, 60.0)
(0, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.dp.budget import REPORT_TOLERANCE


@dataclass(frozen=True)
class Level:
    """One requirement level of a stream: a name, its window ``w`` (slots) and its ``eps``."""

    name: str
    w: int
    eps: float


@dataclass(frozen=True)
class History:
    """A user's level changes ``(at, level name or None)``, oldest first."""

    changes: tuple[tuple[float, str | None], ...]
    truncated: bool = False


def slot_of(ts: float, slot_s: float) -> int:
    """The slot that holds time ``ts``."""
    return math.floor(ts / slot_s)


def level_index(name: str | None, levels: tuple[Level, ...], default: int) -> int:
    """The index of level ``name``; the default level for None or a name not offered."""
    for i, level in enumerate(levels):
        if level.name == name:
            return i
    return default


def group_of(
    history: History | None, slot: int, levels: tuple[Level, ...], default: int, slot_s: float
) -> int | None:
    """The level index a user's value in ``slot`` must count under, or None (not counted)."""
    if history is None:
        return default
    current: int | None = None if history.truncated else default
    for at, name in history.changes:
        new = level_index(name, levels, default)
        if new == current:
            continue
        start = slot_of(at, slot_s) + 1
        if slot < start:
            return current
        if current is None:
            gap = max(level.w for level in levels)
        else:
            gap = max(levels[current].w, levels[new].w)
        if slot < start + gap:
            return None
        current = new
    return current


def groups_of(
    history: History | None,
    slots: npt.NDArray[np.int64],
    levels: tuple[Level, ...],
    default: int,
    slot_s: float,
) -> npt.NDArray[np.int64]:
    """:func:`group_of` for many slots of one user (-1: not counted)."""
    return np.fromiter(
        (
            -1 if (g := group_of(history, int(s), levels, default, slot_s)) is None else g
            for s in slots
        ),
        dtype=np.int64,
        count=slots.shape[0],
    )


def over(spent: npt.NDArray[np.float64], eps: float) -> npt.NDArray[np.bool_]:
    """Which float window spends (as the audit reports them) exceed ``eps``, with the one
    tolerance for reported budgets (:data:`app.dp.budget.REPORT_TOLERANCE`)."""
    return spent > eps * (1.0 + REPORT_TOLERANCE)
