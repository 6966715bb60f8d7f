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
) -> CentralPair:
    """The pair for one relation, scenario and target group: ``prefix`` equal slots (default:
    none for ``boundary``, ``w - 1`` for ``jumps``), the window, then ``suffix`` equal slots."""
    claim = groups[group]
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
        base[:, group, 0] += 1
        base[window, group, 0] -= 1
    a, b = base.copy(), base.copy()
    a[window, group, 0] += 1
    if relation == "replace":
        b[window, group, 1] += 1
    sens = SENSITIVITY[relation] if sensitivity is None else sensitivity
    return CentralPair(relation, scenario, group, claim, sens, a, b, prefix)


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
