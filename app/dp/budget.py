"""All budget arithmetic of the central core: exact fixed-point units and the window ledger.

Budgets are never added or compared as floats. Each requirement group ``(w, eps)`` counts its
budget in integer *units*: ``eps`` is ``2 * w * 2**SHARE_BITS`` units, so one PBA/BA share
``eps / (2w)`` is exactly ``2**SHARE_BITS`` units and the halvings of PBD/BD are exact for the
first ``SHARE_BITS`` steps, after which they round down (spending less than offered, never
more). Window sums are exact integer sums, so ``spent <= eps`` is an integer comparison with no
tolerance. Python integers are unbounded, and every unit count stays below ``2**63`` for
``w <= 2**20``, so states serialize to msgpack as plain ints.

Floats appear only at the edges: :meth:`GroupBudget.to_eps` converts units to the noise scale,
and :data:`REPORT_TOLERANCE` is the one tolerance for checking float budgets reported in
releases (``Release.spent``) against ``eps``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from app.dp.errors import InsufficientBudgetError, StateMismatchError
from app.dp.types import Group

SHARE_BITS = 40
"""One share ``eps / (2w)`` is ``2**SHARE_BITS`` units."""

REPORT_TOLERANCE = 1e-9
"""Relative tolerance for float budgets reported outside the core (releases, audit, metrics)."""


def exact(eps: float) -> Fraction:
    """The decimal an operator meant by a float budget: ``exact(0.6) == Fraction(3, 5)``.

    >>> exact(0.6)
    Fraction(3, 5)
    """
    return Fraction(repr(float(eps)))


def within(spent: float, limit: float) -> bool:
    """Whether a float budget reported outside the core respects ``limit``.

    >>> within(0.6000000000001, 0.6), within(0.61, 0.6)
    (True, False)
    """
    return spent <= limit * (1.0 + REPORT_TOLERANCE)


@dataclass(frozen=True)
class GroupBudget:
    """The unit system of one requirement group."""

    group: Group

    @cached_property
    def total(self) -> int:
        """``eps`` in units."""
        return 2 * self.group.w << SHARE_BITS

    @property
    def half(self) -> int:
        """``eps / 2`` in units: the dissimilarity half, and the publication half."""
        return self.group.w << SHARE_BITS

    @property
    def share(self) -> int:
        """One share ``eps / (2w)`` in units."""
        return 1 << SHARE_BITS

    @cached_property
    def _eps_per_unit(self) -> Fraction:
        return exact(self.group.eps) / self.total

    def to_eps(self, units: int) -> float:
        """Units as a float budget, for noise scales and reports."""
        return float(units * self._eps_per_unit)

    def to_fraction(self, units: int) -> Fraction:
        """Units as an exact rational budget, for grouping equal budgets across groups."""
        return units * self._eps_per_unit


class WindowLedger:
    """Budget spent per requirement group in its last ``w`` slots, in exact units.

    Per slot, a mechanism first :meth:`ensure` s that what it may spend (the dissimilarity budget
    plus the publication budget it offers) fits every group's window, then draws noise, then
    :meth:`record` s what it actually spent. The ledger refuses (``InsufficientBudgetError``)
    any slot that would take a window of ``w_g`` slots above ``eps_g`` in total, or above
    ``publication_share * eps_g`` on publication (one half for the mechanisms that split the
    budget between dissimilarity and publication, all of it for Uniform and Sample).

    >>> ledger = WindowLedger([Group(2, 1.0)])
    >>> b = ledger.budgets[0]
    >>> ledger.record([b.share], [b.half // 2])
    >>> ledger.pub_window(0) == b.half // 2
    True
    >>> ledger.ensure([b.share], [b.half])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.dp.errors.InsufficientBudgetError: group 0: publication window already spent 0.25, ...
    """

    def __init__(
        self, groups: Sequence[Group], publication_share: Fraction = Fraction(1, 2)
    ) -> None:
        self.budgets = tuple(GroupBudget(g) for g in groups)
        self.publication_share = publication_share
        self._total: list[deque[int]] = [deque(maxlen=g.w) for g in groups]
        self._pub: list[deque[int]] = [deque(maxlen=g.w) for g in groups]
        self._total_sum = [0] * len(groups)
        self._pub_sum = [0] * len(groups)

    def window(self, g: int) -> int:
        """Total units group ``g`` spent in its previous ``w_g - 1`` slots (what the next slot
        shares a window with)."""
        return self._total_sum[g] - _oldest(self._total[g])

    def pub_window(self, g: int) -> int:
        """Publication units group ``g`` spent in its previous ``w_g - 1`` slots."""
        return self._pub_sum[g] - _oldest(self._pub[g])

    def spent(self, g: int) -> Fraction:
        """Budget (in eps, exact) group ``g`` spent in the window of ``w_g`` slots ending at the
        last recorded slot: what operators watch (1.0 x eps = the window is exhausted)."""
        return self.budgets[g].to_fraction(self._total_sum[g])

    def pub_limit(self, g: int) -> int:
        """Units group ``g`` may spend on publication per window (``eps/2`` for PWSM mechanisms)."""
        return int(self.budgets[g].total * self.publication_share)

    def ensure(self, dc: Sequence[int], pub: Sequence[int]) -> None:
        """Raise unless spending ``dc[g] + pub[g]`` this slot keeps every window within limits."""
        for g, b in enumerate(self.budgets):
            if dc[g] < 0 or pub[g] < 0:
                raise InsufficientBudgetError(g, 0.0, b.to_eps(min(dc[g], pub[g])), 0.0, "negative")
            spent_pub, pub_limit = self.pub_window(g), self.pub_limit(g)
            if spent_pub + pub[g] > pub_limit:
                raise InsufficientBudgetError(
                    g, b.to_eps(spent_pub), b.to_eps(pub[g]), b.to_eps(pub_limit), "publication"
                )
            spent = self.window(g)
            if spent + dc[g] + pub[g] > b.total:
                raise InsufficientBudgetError(
                    g, b.to_eps(spent), b.to_eps(dc[g] + pub[g]), b.to_eps(b.total), "total"
                )

    def record(self, dc: Sequence[int], pub: Sequence[int]) -> None:
        """Append this slot's spending (after :meth:`ensure` let it through)."""
        self.ensure(dc, pub)
        for g in range(len(self.budgets)):
            self._total_sum[g] += _push(self._total[g], dc[g] + pub[g])
            self._pub_sum[g] += _push(self._pub[g], pub[g])

    def state_dict(self) -> dict[str, Any]:
        return {"total": [list(q) for q in self._total], "pub": [list(q) for q in self._pub]}

    def load_state(self, state: dict[str, Any]) -> None:
        total, pub = state["total"], state["pub"]
        if len(total) != len(self.budgets) or len(pub) != len(self.budgets):
            raise StateMismatchError("ledger state has a different number of groups")
        for g in range(len(self.budgets)):
            self._total[g].clear()
            self._total[g].extend(int(x) for x in total[g])
            self._pub[g].clear()
            self._pub[g].extend(int(x) for x in pub[g])
            self._total_sum[g] = sum(self._total[g])
            self._pub_sum[g] = sum(self._pub[g])


def _oldest(ring: deque[int]) -> int:
    """The oldest entry of a full ring (it leaves the window at the next slot), else 0."""
    return ring[0] if ring.maxlen is not None and len(ring) == ring.maxlen else 0


def _push(ring: deque[int], units: int) -> int:
    """Append to a bounded ring; return the change of its sum."""
    if ring.maxlen == 0:
        return 0
    dropped = ring[0] if len(ring) == ring.maxlen else 0
    ring.append(units)
    return units - dropped


class SlotLedger:
    """One user's own budget ledger in exact units: what it spent at each recent slot.

    A device (local DP) keeps this ledger and refuses a collection request that would take any
    window of ``w`` slots above its ``eps``, whatever the service asks (spec ``seed-004`` §1.5).
    Units are those of :class:`GroupBudget` (``eps`` is ``2 * w * 2**SHARE_BITS`` units), so a
    population-division report, which spends the whole ``eps``, fits at most once per window,
    and the budget-division shares ``eps/w`` and ``eps/(2w)`` are exact. Requests must come in
    non-decreasing slot order; several reports in one slot add up.

    >>> ledger = SlotLedger(Group(3, 1.0))
    >>> full = ledger.budget.total
    >>> ledger.record(5, full)
    >>> ledger.fits(7, 1), ledger.fits(8, full)
    (False, True)
    >>> ledger.record(7, ledger.budget.share)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.dp.errors.InsufficientBudgetError: group 0: slot 7 window already spent 1, requested 0.16...
    """

    def __init__(self, group: Group) -> None:
        self.budget = GroupBudget(group)
        self._spent: dict[int, int] = {}

    @property
    def last_slot(self) -> int | None:
        """The latest slot with a recorded report, or None."""
        return max(self._spent) if self._spent else None

    def window(self, slot: int) -> int:
        """Units spent in the ``w`` slots ending at ``slot``."""
        first = slot - self.budget.group.w + 1
        return sum(u for s, u in self._spent.items() if first <= s <= slot)

    def fits(self, slot: int, units: int) -> bool:
        """Whether spending ``units`` at ``slot`` keeps the window ending there within ``eps``."""
        last = self.last_slot
        if units < 0 or (last is not None and slot < last):
            return False
        return self.window(slot) + units <= self.budget.total

    def record(self, slot: int, units: int) -> None:
        """Spend ``units`` at ``slot``; raise :class:`InsufficientBudgetError` if it won't fit."""
        if not self.fits(slot, units):
            last = self.last_slot
            what = f"slot {slot}" if last is None or slot >= last else f"slot {slot} < {last} "
            raise InsufficientBudgetError(
                0,
                self.budget.to_eps(self.window(slot)),
                self.budget.to_eps(units),
                self.budget.group.eps,
                what,
            )
        self._spent[slot] = self._spent.get(slot, 0) + units
        first = slot - self.budget.group.w + 1
        for s in [s for s in self._spent if s < first]:  # at most w entries stay
            del self._spent[s]

    def state_dict(self) -> dict[str, Any]:
        return {"spent": [[s, u] for s, u in sorted(self._spent.items())]}

    def load_state(self, state: dict[str, Any]) -> None:
        self._spent = {int(s): int(u) for s, u in state["spent"]}


PEAK_LABEL = "max per-user spend in any w-window"
"""How every output names :attr:`WindowPeak.peak`: the figure a level's ``eps`` bounds."""


class WindowPeak:
    """The largest spend of any one user in any window of ``w`` consecutive slots.

    This is the figure a w-event guarantee's ``eps`` bounds (per user, per window), as opposed
    to what a slot's rounds spent together: under population division two rounds of one slot
    ask disjoint cohorts, so a slot may spend ``2 eps`` in total while no user spends more than
    ``eps`` in any window. Feed it every report in slot order (:meth:`record`: the slot, the
    users who reported, the units each spent, in :class:`GroupBudget` units of the level's
    ``(w, eps)``); :attr:`peak` is the largest window sum of any user so far and
    :meth:`window` that of the window ending at a slot. Memory: the reports of the last ``w``
    slots.

    A user's window sums only grow at its reports, so the largest sum over all windows is
    reached at a window ending at one of them: checking each user's window as it reports
    finds the peak exactly.

    >>> peak = WindowPeak(Group(3, 0.6))
    >>> third = peak.budget.total // 3
    >>> peak.record(1, [0, 1], third)
    >>> peak.record(1, [2], third)        # another cohort in the same slot
    >>> peak.record(3, [0], third)
    >>> peak.record(4, [0, 2], third)     # user 0: slots 3 and 4; slot 1 left its window
    >>> peak.eps(peak.peak), peak.eps(peak.window(4)), peak.eps(peak.window(7))
    (Fraction(2, 5), Fraction(2, 5), Fraction(0, 1))
    """

    def __init__(self, group: Group) -> None:
        self.budget = GroupBudget(group)
        self.peak = 0
        """The largest units any user spent in any window of ``w`` slots so far."""
        self._recent: deque[tuple[int, dict[int, int]]] = deque()

    def record(self, slot: int, users: Iterable[int], units: int) -> None:
        """Each of ``users`` spent ``units`` at ``slot`` (slots never go back)."""
        if self._recent and slot < self._recent[-1][0]:
            raise ValueError(f"slot must not go back, got {slot} after {self._recent[-1][0]}")
        first = slot - self.budget.group.w + 1
        while self._recent and self._recent[0][0] < first:
            self._recent.popleft()
        if not self._recent or self._recent[-1][0] != slot:
            self._recent.append((slot, {}))
        spent = self._recent[-1][1]
        for user in users:
            spent[int(user)] = spent.get(int(user), 0) + units
            total = sum(s.get(int(user), 0) for t, s in self._recent if t >= first)
            self.peak = max(self.peak, total)

    def window(self, slot: int) -> int:
        """The largest units any user spent in the ``w`` slots ending at ``slot`` (a slot at
        or after the last one recorded: older slots are forgotten)."""
        first = slot - self.budget.group.w + 1
        totals: dict[int, int] = {}
        for t, spent in self._recent:
            if first <= t <= slot:
                for user, units in spent.items():
                    totals[user] = totals.get(user, 0) + units
        return max(totals.values(), default=0)

    def eps(self, units: int) -> Fraction:
        """``units`` of this level in eps, exactly."""
        return self.budget.to_fraction(units)
