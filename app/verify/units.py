"""Per user, across the streams of a privacy unit: what was spent in any interval of ``H`` s.

The central accountant leaves, per stream, the rows a user was counted in: the slot's clock
interval and the audit's spend of the user's group there (:class:`UserSpend`). This module puts
the rows of every central stream of one unit together and finds, for each user, the interval of
``H`` seconds (placed anywhere) whose slots spent the most, and compares it with the bound the
unit states (:class:`app.dp.units.UnitBound`, recomputed here from the configuration, as the
worker's audit records carry it). Open-domain streams spend a delta per slot too (their audit's
``delta_spent_exact_by_group``): each user's delta is summed the same way, on its own worst
interval, against the unit's delta (a row of a labels stream spends no delta).

The worst placement starts just before one of the user's slots ends: moving an interval later
until then keeps every slot it touches and can only reach more. With ``t = end_j``, an interval
touches the slots with ``start < end_j + H`` and ``end >= end_j``: a prefix sum over starts
less a prefix sum over ends, for all users at once (rows keyed by user, then time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.dp.units import UnitBound

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

EDGE_S = 1e-3
"""Slots that only meet an interval's open end (a slot starting where the interval ends) do not
count: clock times are compared with this margin (slots are at least 0.1 s long)."""


@dataclass(frozen=True)
class UserSpend:
    """One stream's counted rows: user id, the slot's start and end (Unix seconds), and what
    the user's group spent in the slot (audit, in the unit's ``replace`` relation): eps, and
    delta for an open stream (None: the stream spends no delta)."""

    users: tuple[str, ...]
    user: IntArray
    start: FloatArray
    end: FloatArray
    spend: FloatArray
    delta: FloatArray | None = None

    def deltas(self) -> UserSpend:
        """The same rows priced at their delta (zero without one)."""
        delta = np.zeros_like(self.spend) if self.delta is None else self.delta
        return UserSpend(self.users, self.user, self.start, self.end, delta)


@dataclass(frozen=True)
class UnitFinding:
    """A unit's accounting: its bound, the users seen, the worst user's interval spend (eps,
    and delta), and the users whose worst interval went beyond the bound (eps, and delta)."""

    bound: UnitBound
    streams: tuple[str, ...]
    users: int
    worst: float
    over: tuple[tuple[str, float, float], ...]
    """``(user id, interval start, spent)`` per user beyond the bound."""
    worst_delta: float = 0.0
    over_delta: tuple[tuple[str, float, float], ...] = ()
    """``(user id, interval start, delta spent)`` per user beyond the bound's delta."""


def worst_intervals(rows: Sequence[UserSpend], interval_s: float) -> dict[str, tuple[float, float]]:
    """Per user id: ``(start of its worst interval, what it spent there)``."""
    ids = sorted({u for r in rows for u in r.users})
    index = {u: i for i, u in enumerate(ids)}
    user = np.concatenate(
        [np.array([index[u] for u in r.users], dtype=np.int64)[r.user] for r in rows]
    )
    start = np.concatenate([r.start for r in rows])
    end = np.concatenate([r.end for r in rows])
    spend = np.concatenate([r.spend for r in rows])
    if user.size == 0:
        return {}
    t0 = float(start.min())
    span = float(end.max()) - t0 + interval_s + 1.0
    base = user.astype(np.float64) * span - t0
    by_start, by_end = np.argsort(base + start), np.argsort(base + end)
    key_start, key_end = (base + start)[by_start], (base + end)[by_end]
    cum_start = np.concatenate([[0.0], np.cumsum(spend[by_start])])
    cum_end = np.concatenate([[0.0], np.cumsum(spend[by_end])])
    reach = np.searchsorted(key_start, base + end + interval_s - EDGE_S, side="left")
    before = np.searchsorted(key_end, base + end - EDGE_S, side="left")
    total = cum_start[reach] - cum_end[before]
    out: dict[str, tuple[float, float]] = {}
    order = np.lexsort((-total, user))
    first = np.ones(order.size, dtype=bool)
    first[1:] = user[order][1:] != user[order][:-1]
    for j in order[first]:
        out[ids[int(user[j])]] = (float(end[j]), float(total[j]))
    return out


def check_unit(bound: UnitBound, rows: dict[str, UserSpend]) -> UnitFinding:
    """Judge one unit on its streams' rows (``rows``: stream id -> rows; streams of the unit
    missing from it were not accounted, e.g. local ones)."""
    worst = worst_intervals(list(rows.values()), bound.interval_s)
    worst_delta = worst_intervals([r.deltas() for r in rows.values()], bound.interval_s)
    return UnitFinding(
        bound,
        tuple(rows),
        len(worst),
        max((spent for _, spent in worst.values()), default=0.0),
        _beyond(worst, bound.eps, 1e-9),
        max((spent for _, spent in worst_delta.values()), default=0.0),
        _beyond(worst_delta, bound.delta, 1e-9 * bound.delta),
    )


def _beyond(
    worst: dict[str, tuple[float, float]], bound: float, slack: float
) -> tuple[tuple[str, float, float], ...]:
    """The users whose worst interval spent more than ``bound`` (``slack``: float rounding)."""
    return tuple((u, t, spent) for u, (t, spent) in sorted(worst.items()) if spent > bound + slack)
