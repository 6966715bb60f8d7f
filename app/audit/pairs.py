"""Neighbouring inputs: the pairs of streams the auditor tells apart, under each privacy model.

Central (w-event, per requirement group ``g`` with ``(w_g, eps_g)``): the streams hold the same
other users; inside one window of ``w_g`` slots one user of group ``g`` is changed; before it
(a prefix) and after it (one slot, to see that nothing leaks after the window) they agree. The
runner plays the prefix once and starts every trial from its state (:mod:`app.audit.runners`):
the prefix is identical on both inputs, so conditioning on one realization of it keeps the
bound valid (``P(o, E | A) <= e**eps P(o, E | B)`` and ``P(o | A) = P(o | B)``).

* ``add/remove``: stream A holds the user's value in cell 0 at every window slot, stream B does
  not hold the user; the mechanism is built with ``sensitivity=1``.
* ``replace``: the user holds cell 0 in A and cell 1 in B; the mechanism is built with
  ``sensitivity=2`` (the known 2-eps gap of replacing under ``sensitivity=1`` is a power control,
  :mod:`app.audit.controls`).

Scenarios (the other users' counts, the same in A and B):

* ``boundary``: constant counts ``[n, 0, ...]`` in the target's group, with ``n`` the level at
  which the mechanism's first-slot publication probability crosses 1/2
  (:func:`boundary_level`, a bisection on the mechanism itself). There an adaptive mechanism's
  decision is most sensitive to one user, and a decision taken on un-noised data flips.
* ``jumps``: every group's counts jump between ``[J, 0, ...]`` and ``[0, J, ...]`` at every slot,
  so adaptive mechanisms publish whenever their schedule allows (the regime where a budget
  schedule that forgets to nullify overspends).

Local (w-event LDP): one device's true value is ``a = 0`` in A and ``b = 1`` in B at every slot
of its window; every other device holds a fixed value (:class:`LocalPair`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from app.dp.types import Group

IntArray = npt.NDArray[np.int64]
Relation = Literal["add/remove", "replace"]
RELATIONS: tuple[Relation, ...] = ("add/remove", "replace")
SCENARIOS = ("boundary", "jumps")
SENSITIVITY: dict[Relation, int] = {"add/remove": 1, "replace": 2}
JUMP = 200
"""The other users' count in the ``jumps`` scenario."""
BOUNDARY_CAP = 1 << 20
"""Largest level :func:`boundary_level` tries."""


@dataclass(frozen=True)
class CentralPair:
    """Two central streams ``(T, m, d)`` that differ in one user of group ``group``."""

    relation: Relation
    scenario: str
    group: int
    claim: Group
    sensitivity: int
    a: IntArray
    b: IntArray
    prefix: int = 0

    @property
    def delta(self) -> npt.NDArray[np.float64]:
        """Expected release difference per slot and cell (all groups pooled), ``(T, d)``."""
        return np.asarray((self.a - self.b).sum(axis=1), dtype=np.float64)

    @property
    def mid(self) -> npt.NDArray[np.float64]:
        return np.asarray((self.a + self.b).sum(axis=1) / 2.0, dtype=np.float64)


def central_pair(
    relation: Relation,
    scenario: str,
    group: int,
    groups: tuple[Group, ...],
    d: int,
    level: int = 0,
    sensitivity: int | None = None,
    prefix: int | None = None,
    suffix: int = 1,
    cells_a: tuple[int, ...] = (0,),
    cells_b: tuple[int, ...] = (1,),
) -> CentralPair:
    """The pair for one relation, scenario and target group: ``prefix`` equal slots (default:
    none for ``boundary``, ``w - 1`` for ``jumps``), the window, then ``suffix`` equal slots.

    The user holds one value in each of ``cells_a`` per window slot (``l = len(cells_a)``
    values, the (w,n) papers' ``l``); under ``replace`` they move to ``cells_b`` on input B.
    The relation's sensitivity is ``l`` (add/remove) or ``2 l`` (replace)."""
    claim = groups[group]
    ca, cb = list(cells_a), list(cells_b)
    if prefix is None:
        prefix = 0 if scenario == "boundary" else claim.w - 1
    slots = prefix + claim.w + suffix
    window = slice(prefix, prefix + claim.w)
    base = np.zeros((slots, len(groups), d), dtype=np.int64)
    if scenario == "boundary":
        base[:, group, 0] = level
    elif scenario == "jumps":
        base[0::2, :, 0] = JUMP
        base[1::2, :, 1] = JUMP
    else:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    if relation == "replace":  # the user is there before and after, unchanged
        base[:, group, ca] += 1
        base[window, group, ca] -= 1
    a, b = base.copy(), base.copy()
    a[window, group, ca] += 1
    if relation == "replace":
        b[window, group, cb] += 1
    sens = SENSITIVITY[relation] * len(ca) if sensitivity is None else sensitivity
    return CentralPair(relation, scenario, group, claim, sens, a, b, prefix)


def ball_pages(hops: npt.NDArray[np.int64], n: int) -> list[int]:
    """The pages of one (w,n) spatial window, nearest first: within ``n - 1`` hops of the
    centre (``hops``: every page's hop distance from it, negative if unreachable). This is the
    relation of the (w,n) papers (``app.dp.wn.ledger``: ``W_n(c)``)."""
    inside = np.flatnonzero((hops >= 0) & (hops <= n - 1))
    return [int(p) for p in inside[np.argsort(hops[inside], kind="stable")]]


def graph_cells(
    pages: list[int], values: int, relation: Relation
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Where the target's ``values`` values per slot lie on A and (replace) on B, all inside
    one spatial window ``pages``; ``None`` when the window cannot hold the relation (replace
    needs two distinct placements: a window of one page, ``n = 1``, cannot)."""
    count = min(values, len(pages))
    cells_a = tuple(pages[:count])
    if relation == "add/remove":
        return cells_a, ()
    cells_b = tuple(pages[-count:])
    if set(cells_b) == set(cells_a):
        return None
    return cells_a, cells_b


PERIOD_LEVEL = 100
"""The other users' count in every cell of a period pair: high enough that no release is
truncated at 0, where a period mechanism's noise would hide the change."""
PLACEMENTS = ("straddle", "sampled", "aligned")


def period_pair(
    relation: Relation,
    placement: str,
    group: int,
    groups: tuple[Group, ...],
    d: int,
    period: int,
    level: int = PERIOD_LEVEL,
) -> CentralPair:
    """A pair for a period mechanism (periods of ``period`` slots aligned on slot 1), placed
    where a period mechanism's loss concentrates. Every trial runs from slot 1 to the end of the
    last period the window touches, and every released slot is observed.

    * ``straddle``: the window of ``w_g`` slots crosses the boundary of periods 1 and 2 (half
      in each): the window pays for two periods, the case strict mode halves ``eps_P`` for.
    * ``sampled``: the same window, but only the last slot of period 1 and the first of period 2
      change: the slots OptStream's sampler always measures, so the whole change lands on
      sampled slots (and a data-dependent sampler sees it in both periods).
    * ``aligned``: the window is the start of period 1: inside one period, the case that
      non-strict mode (``eps_P = eps``) is tight on.

    Per-slot mechanisms (``period = 1``) get ``aligned`` windows only (periods of one slot).
    """
    claim = groups[group]
    w = claim.w
    if placement == "aligned" or period == 1:
        start, changed = 0, list(range(w))
    elif placement in ("straddle", "sampled"):
        start = max(period - max(w // 2, 1), 0)
        window = list(range(start, start + w))
        changed = (
            window if placement == "straddle" else [s for s in window if s in (period - 1, period)]
        )
    else:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    last = max(changed) + 1
    slots = -(-last // period) * period
    a = np.zeros((slots, len(groups), d), dtype=np.int64)
    a[:, group, :] = level
    b = a.copy()
    if relation == "replace":  # the user holds cell 0 throughout on A, cell 1 when changed on B
        b[changed, group, 0] -= 1
        b[changed, group, 1] += 1
    else:  # the user holds cell 0 at the changed slots on A, nothing on B
        a[changed, group, 0] += 1
    return CentralPair(relation, placement, group, claim, SENSITIVITY[relation], a, b, 0)


def boundary_level(
    first_slot_publishes: Callable[[int, int], float], probes: int, cap: int = BOUNDARY_CAP
) -> int:
    """The largest level ``n`` whose first-slot publication rate is below 1/2 (0 if none).

    ``first_slot_publishes(n, probes)`` runs ``probes`` fresh mechanisms one slot on counts
    ``[n, 0, ...]`` and returns the fraction that published. The rate grows with ``n`` for the
    dissimilarity-based mechanisms (``dis = n / d`` at the first slot); an exponential search
    then a bisection find the crossing with about ``2 log2(n)`` probes.
    """
    if first_slot_publishes(0, probes) >= 0.5:
        return 0
    low, high = 0, 1
    while first_slot_publishes(high, probes) < 0.5:
        low, high = high, high * 2
        if high > cap:
            return cap
    while high - low > 1:
        middle = (low + high) // 2
        if first_slot_publishes(middle, probes) < 0.5:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class LocalPair:
    """One device (``target``, in group ``group``) holding ``a`` or ``b`` in every window slot."""

    scenario: str
    group: int
    claim: Group
    target: int
    a: int
    b: int
    slots: int
    others: IntArray

    relation: str = "replace value"

    def values(self, side: str) -> int:
        return self.a if side == "A" else self.b


def local_pair(mechanism: Any, group: int, scenario: str = "steady") -> LocalPair:
    """The pair for the first device of ``group`` of a built local mechanism."""
    sizes = list(mechanism.group_users)
    target = int(sum(sizes[:group]))
    claim = mechanism.groups[group]
    others = np.arange(mechanism.users, dtype=np.int64) % 2  # half hold 0, half hold 1
    return LocalPair(scenario, group, claim, target, 0, 1, claim.w, others)
