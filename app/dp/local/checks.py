"""The conformance adapter of the local mechanisms (kind ``"local"``).

The checks of :mod:`app.dp.checks` drive a local mechanism one slot at a time through its
protocol (``open_slot``, ``on_tally`` per round, ``close_slot``). Devices are replaced by
:func:`random_tally`: the support counts of the asked users' reports with random frequencies
that sometimes jump, so that the adaptive mechanisms publish, skip and nullify. A slot's input
is ``(seed, slot)``: the slot's frequencies and randomness come from them alone, so a run cut in
two and resumed draws exactly what the whole run draws. What the mechanism is handed is its
tallies.

The window invariant is checked from the requests alone: every bucket (hence every user, all
users of a bucket are asked together) and every group must spend at most ``eps`` in exact
units in every window of ``w`` slots, and a bucket is never asked again before ``w`` slots.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.checks import Factory, Trace
from app.dp.local import simulate
from app.dp.local.base import LocalMechanism
from app.dp.local.wire import CollectionRequest, Tally, mask_users
from app.dp.types import Group, Release


def random_tally(
    request: CollectionRequest, m: LocalMechanism, f: np.ndarray[Any, Any], rng: np.random.Generator
) -> Tally:
    """Support counts of every asked user holding values drawn from ``f`` (exact law)."""
    from app.dp.oracles import make  # local import keeps the module's public surface small

    asked = mask_users(request, m.users)
    if request.levels is not None:  # a personalized mechanism names every user's level
        group_of = np.frombuffer(request.levels, dtype=np.uint8).astype(np.int64)
    else:
        group_of = m.user_groups()
    support, reports = [], []
    for g in range(len(request.oracle)):
        n = int((asked & (group_of == g)).sum())
        counts = rng.multinomial(n, f)
        oracle = make(request.oracle[g], request.d, request.eps[g])
        s = oracle.sample_support(counts, rng)
        if s is None:
            s = oracle.support(oracle.perturb(np.repeat(np.arange(request.d), counts), rng))
        support.append(s)
        reports.append(n)
    return Tally(request.slot, request.round, np.array(support), np.array(reports))


class Local:
    """Local mechanisms: one slot is its rounds on random tallies, then its release."""

    sizes = {"state": 7, "roundtrip": 12, "seeded": 15, "shape": 30, "input": 5}
    invariant_slots = 600

    def size(self, check: str, m: Any) -> int:
        return self.sizes[check]

    def cuts(self, slots: int) -> Iterable[int]:
        return (1, 5, 9)  # a local slot costs a round of reports: three cuts, not all

    def inputs(self, m: Any, rng: np.random.Generator, slots: int) -> list[Any]:
        seed = int(rng.integers(2**32))
        return [(seed, t) for t in range(m.t + 1, m.t + slots + 1)]

    def step(self, m: Any, x: Any, rng: np.random.Generator, trace: Trace) -> list[Release]:
        seed, t = x
        return [_slot(m, seed, t, trace)]  # the slot's own generators, not ``rng``

    def mid_slot(self, m: Any, rng: np.random.Generator) -> bool:
        m.open_slot(rng)
        return True

    def lag(self, m: Any) -> int:
        return 0

    def check_release(self, m: Any, r: Release, previous: npt.NDArray[np.float64]) -> None:
        assert r.users_dc is not None and r.users_pub is not None, f"slot {r.slot}: no users"
        if not r.fresh:
            assert r.users_pub == 0, f"slot {r.slot} repeat asked users to publish"

    def invariant_runs(
        self, factory: Factory, rng: np.random.Generator
    ) -> Iterator[tuple[Any, int, list[Group]]]:
        m = factory()
        yield m, self.invariant_slots, list(m.groups)

    def window_violations(self, m: Any, trace: Trace, groups: list[Group]) -> list[str]:
        return window_violations(m, trace.requests, len(trace.releases))

    def bad_params(self, factory: Factory) -> list[tuple[str, Any]]:
        cls = type(factory())
        good = cls.test_params()
        takes = inspect.signature(cls.__init__).parameters
        bad = {"d": 1, "eps": -1.0, "w": 0, "users": 0, "oracle": "nope", "buckets": 0}
        return [
            (name, value)
            for name, value in bad.items()
            if (name in good or name in takes) and (name not in ("eps", "w") or name in good)
        ]


LOCAL = Local()


def drive(
    m: LocalMechanism, slots: int, seed: int
) -> tuple[list[Release], list[CollectionRequest]]:
    """Run ``slots`` more slots on random frequencies that jump every few slots (as the
    checks do); the releases and every request."""
    trace = Trace()
    for t in range(m.t + 1, m.t + slots + 1):
        _slot(m, seed, t, trace)
    return trace.releases, trace.requests


def _slot(m: Any, seed: int, t: int, trace: Trace) -> Release:
    """Slot ``t`` of a run seeded ``seed``: frequencies that hold for a few slots, the slot's
    own generator (so a run resumed at any slot draws what the whole run draws)."""
    segment = np.random.default_rng([seed, t // 4 + (t % 7 == 0)])
    f = segment.dirichlet(np.ones(m.d) * 0.5)
    rng = np.random.default_rng([seed, t, 1])

    def answer(request: CollectionRequest) -> Tally:
        trace.requests.append(request)
        tally = random_tally(request, m, f, rng)
        trace.handed.append((tally, copy.deepcopy(tally)))
        return tally

    release = simulate.drive(m, answer, rng)
    trace.releases.append(release)
    return release


def window_violations(
    m: LocalMechanism, requests: list[CollectionRequest], slots: int
) -> list[str]:
    """Windows in which a bucket or a group spent more than its ``eps`` (empty: none)."""
    if getattr(m, "personalized", False):  # every user's own (w_i, eps_i): PLDP-IDS
        return personal_window_violations(m, requests)
    budgets = m.ledger.budgets
    problems = []
    if m.population_division:
        spent = np.zeros((slots + 1, m.n_buckets), dtype=np.int64)
        for r in requests:
            cohort = r.cohort_buckets()
            spent[r.slot, slice(None) if cohort is None else cohort] += r.units[0]
        total, w = budgets[0].total, m.w
        sums = np.cumsum(spent, axis=0)
        window = sums[w:] - sums[:-w] if slots >= w else sums[1:]
        window = np.vstack([sums[1:w], window]) if slots >= w else window
        bad = np.argwhere(window > total)
        problems += [f"bucket {b} over eps in window ending at slot {t + 1}" for t, b in bad[:5]]
        reported = np.argwhere(spent > 0)
        for b in np.unique(reported[:, 1]):
            s = reported[reported[:, 1] == b, 0]
            if (np.diff(s) < w).any():
                problems.append(f"bucket {b} asked again within {w} slots")
                break
    else:
        for g, b in enumerate(budgets):
            per_slot = [0] * (slots + 1)
            for r in requests:
                per_slot[r.slot] += r.units[g]
            for t in range(1, slots + 1):
                if sum(per_slot[max(1, t - b.group.w + 1) : t + 1]) > b.total:
                    problems.append(f"group {g} over eps in window ending at slot {t}")
                    break
    return problems


def personal_window_violations(m: Any, requests: list[CollectionRequest]) -> list[str]:
    """Personalized population division (PLDP-IDS): the invariants of every user's own level.

    ``m.population.level_sizes[k, b] > 0`` says bucket ``b`` holds users of level ``k``
    (``m.groups[k]``), who report with ``r.units[k]`` whenever a request asks ``b``. Checks, in
    exact units: (I1) in every window of ``w_k`` slots those users spend at most ``eps_k``;
    (I2/I3) a bucket is asked at most once per recycling window ``m.window``, and a level whose
    ``w_k`` exceeds it reports with at most ``eps_k / ceil(w_k / W)``.
    """
    pop, window = m.population, int(m.window)
    if not requests:
        return []
    parts = [_cohort(r, pop.buckets) for r in requests]
    buckets = np.concatenate(parts).astype(np.int64)
    which = np.repeat(np.arange(len(requests)), [p.size for p in parts])
    slots = np.array([r.slot for r in requests], dtype=np.int64)[which]
    order = np.lexsort((slots, buckets))
    buckets, slots, which = buckets[order], slots[order], which[order]
    problems = []
    close = np.flatnonzero((buckets[1:] == buckets[:-1]) & (np.diff(slots) < window))
    if close.size:
        i = int(close[0])
        problems.append(
            f"bucket {buckets[i]} asked at slots {slots[i]} and {slots[i + 1]}, "
            f"less than W={window} apart"
        )
    span = int(slots.max()) + max(g.w for g in m.groups) + 1
    key = buckets * span + slots  # sorted; a bucket's window never reaches the previous one
    units = np.array([list(r.units) for r in requests], dtype=object)
    for k, (group, budget) in enumerate(zip(m.groups, m.ledger.budgets, strict=True)):
        held = pop.level_sizes[k, buckets] > 0
        kk, u = key[held], units[which[held], k]
        if group.w > window and any(
            int(x) * -(-group.w // window) > budget.total for x in set(u.tolist())
        ):
            problems.append(f"level {k} reports more than eps/ceil(w/W) with w={group.w} > W")
        cum = np.concatenate([np.array([0], dtype=object), np.cumsum(u)])
        first = np.searchsorted(kk, kk - group.w + 1, side="left")
        spent = cum[1:] - cum[first]
        over = np.flatnonzero(spent > budget.total)
        if over.size:
            i = int(over[0])
            b, t = int(kk[i] // span), int(kk[i] % span)
            problems.append(
                f"bucket {b} (level {k}: w={group.w}) spent {budget.to_eps(int(spent[i])):.6g} > "
                f"eps={group.eps:g} in the window ending at slot {t}"
            )
    return problems


def _cohort(request: CollectionRequest, buckets: int) -> np.ndarray[Any, Any]:
    cohort = request.cohort_buckets()
    return np.arange(buckets) if cohort is None else cohort


__all__ = ["LOCAL", "drive", "personal_window_violations", "random_tally", "window_violations"]
