"""The (eps, delta) window ledger of an open-domain stream: one row per privacy level.

A level ``Level(w, eps, delta)`` promises (eps, delta)-DP to each user over any ``w``
consecutive slots. Every slot records, per level, the eps and the delta it spent; the ledger
refuses (:class:`~app.dp.errors.InsufficientBudgetError`) a slot that would take the sum of eps
or the sum of delta over a window of ``w`` slots above the level's. Basic (adaptive)
composition of per-slot (eps_t, delta_t)-DP mechanisms gives (sum eps_t, sum delta_t) over the
window, so these two sums are the whole accounting.

Both columns count in the exact integer units of :class:`app.dp.budget.GroupBudget`: a level's
eps is ``2 w 2**SHARE_BITS`` units, and so is its delta (delta's units are the same fractions
of the level's delta). Sums and comparisons are integer operations, with no tolerance.

>>> ledger = OpenLedger([Level(2, 1.0, 1e-4)])
>>> b = ledger.units[0]
>>> ledger.record([b.total // 2], [b.total // 2])
>>> ledger.spent(0)
(Fraction(1, 2), Fraction(1, 20000))
>>> ledger.record([b.total // 2 + 1], [0])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.dp.errors.InsufficientBudgetError: group 0: eps window already spent 0.5, requested 0.5...
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from app.dp import validate
from app.dp.budget import GroupBudget, exact
from app.dp.errors import InsufficientBudgetError, ParameterError, StateMismatchError
from app.dp.types import Group

MAX_DELTA = 1e-3
"""The largest delta a level may declare. delta is the probability with which a user's
presence may show outright (a key only that user holds, released); it must be small against
1 / (number of users), and a stream with fewer than about 1,000 users has no business with an
open key space."""


@dataclass(frozen=True)
class Level:
    """A privacy level of an open-domain stream: (eps, delta)-DP over any ``w`` slots.

    >>> Level(10, 1.0, 1e-5)
    Level(w=10, eps=1.0, delta=1e-05)
    >>> Level(10, 1.0, 0.01)
    Traceback (most recent call last):
    ...
    app.dp.errors.ParameterError: Level.delta must be a finite number > 0 and <= 0.001, got 0.01
    """

    w: int
    eps: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "w", validate.integer("Level.w", self.w))
        object.__setattr__(self, "eps", validate.positive("Level.eps", self.eps))
        delta = validate.number("Level.delta", self.delta, 0.0, strict=True, high=MAX_DELTA)
        object.__setattr__(self, "delta", delta)

    @property
    def group(self) -> Group:
        """The eps part, as the central mechanisms' requirement group."""
        return Group(self.w, self.eps)


def levels(value: Sequence[Any]) -> tuple[Level, ...]:
    """``value`` as a non-empty tuple of :class:`Level` (``[w, eps, delta]`` triples accepted,
    as a state or a YAML file writes them)."""
    items = tuple(Level(*v) if isinstance(v, list | tuple) else v for v in value)
    return validate.sequence("levels", items, Level)


class OpenLedger:
    """eps and delta spent per level in its last ``w`` slots, in exact units."""

    def __init__(self, levels: Sequence[Level]) -> None:
        self.levels = tuple(levels)
        self.units = tuple(GroupBudget(lv.group) for lv in self.levels)
        self._eps: list[deque[int]] = [deque(maxlen=lv.w) for lv in self.levels]
        self._delta: list[deque[int]] = [deque(maxlen=lv.w) for lv in self.levels]

    def eps_of(self, i: int, units: int) -> Fraction:
        """``units`` of level ``i``'s eps column, in eps (exact)."""
        return self.units[i].to_fraction(units)

    def delta_of(self, i: int, units: int) -> Fraction:
        """``units`` of level ``i``'s delta column, as a probability (exact)."""
        return units * exact(self.levels[i].delta) / self.units[i].total

    def ensure(self, eps: Sequence[int], delta: Sequence[int]) -> None:
        """Raise unless spending ``eps[i]`` and ``delta[i]`` units at the next slot keeps every
        level's windows within its eps and its delta."""
        if len(eps) != len(self.levels) or len(delta) != len(self.levels):
            raise ParameterError(f"spending must name {len(self.levels)} levels")
        for i, b in enumerate(self.units):
            for what, ring, ask, show in (
                ("eps", self._eps[i], eps[i], b.to_eps),
                ("delta", self._delta[i], delta[i], lambda u, i=i: float(self.delta_of(i, u))),
            ):
                before = _previous(ring)
                if ask < 0 or before + ask > b.total:
                    raise InsufficientBudgetError(i, show(before), show(ask), show(b.total), what)

    def record(self, eps: Sequence[int], delta: Sequence[int]) -> None:
        """Append one slot's spending (refused as :meth:`ensure` refuses it)."""
        self.ensure(eps, delta)
        for i in range(len(self.levels)):
            self._eps[i].append(int(eps[i]))
            self._delta[i].append(int(delta[i]))

    def spent(self, i: int) -> tuple[Fraction, Fraction]:
        """(eps, delta) level ``i`` spent in the window of ``w`` slots ending at the last slot."""
        return self.eps_of(i, sum(self._eps[i])), self.delta_of(i, sum(self._delta[i]))

    def state_dict(self) -> dict[str, Any]:
        return {"eps": [list(q) for q in self._eps], "delta": [list(q) for q in self._delta]}

    def load_state(self, state: dict[str, Any]) -> None:
        eps, delta = state["eps"], state["delta"]
        if len(eps) != len(self.levels) or len(delta) != len(self.levels):
            raise StateMismatchError("open ledger state has a different number of levels")
        for i in range(len(self.levels)):
            self._eps[i].clear()
            self._eps[i].extend(int(x) for x in eps[i])
            self._delta[i].clear()
            self._delta[i].extend(int(x) for x in delta[i])


def _previous(ring: deque[int]) -> int:
    """What the next slot shares a window with: the last ``w - 1`` entries."""
    full = ring.maxlen is not None and len(ring) == ring.maxlen
    return sum(ring) - (ring[0] if full and ring else 0)
