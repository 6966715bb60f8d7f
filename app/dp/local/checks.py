"""Conformance checks every registered local mechanism must pass (no pytest needed).

Each check is a plain function ``check(factory, rng)``: ``factory()`` builds a fresh mechanism
with the class's :meth:`~app.dp.mechanism.Mechanism.test_params`, ``rng`` is a seeded
generator. A check raises ``AssertionError`` with a message when the mechanism fails.
:func:`yield_local_checks` lists them for ``app.dp.checks``.

Devices are replaced by :func:`random_tally`: the support counts of ``n`` reports with random
frequencies that sometimes jump, so that the adaptive mechanisms publish, skip and nullify.
The window invariant is checked from the requests alone: every bucket (hence every user, all
users of a bucket are asked together) and every group must spend at most ``eps`` in exact
units in every window of ``w`` slots, and a bucket is never asked again before ``w`` slots.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import numpy as np

from app.dp.errors import ParameterError
from app.dp.local.base import LocalMechanism
from app.dp.local.wire import CollectionRequest, Tally, mask_users
from app.dp.types import Release

Factory = Callable[[], Any]
Check = Callable[[Factory, np.random.Generator], None]

SECTIONS = ("Paper", "Parameters", "State", "Privacy", "Deviations", "Examples", "References")


def random_tally(
    request: CollectionRequest, m: LocalMechanism, f: np.ndarray[Any, Any], rng: np.random.Generator
) -> Tally:
    """Support counts of every asked user holding values drawn from ``f`` (exact law)."""
    from app.dp.oracles import make  # local import keeps the module's public surface small

    asked = mask_users(request, m.users)
    group_of = np.repeat(np.arange(len(m.group_users)), m.group_users)
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


def drive(
    m: LocalMechanism, slots: int, seed: int
) -> tuple[list[Release], list[CollectionRequest]]:
    """Run ``slots`` more slots on random frequencies that jump every few slots.

    Slot ``t``'s randomness comes from ``seed`` and ``t`` alone, so a run cut in two and
    resumed draws exactly what the whole run draws. Returns the releases and every request.
    """
    releases, requests = [], []
    for t in range(m.t + 1, m.t + slots + 1):
        segment = np.random.default_rng([seed, t // 4 + (t % 7 == 0)])
        f = segment.dirichlet(np.ones(m.d) * 0.5)
        rng = np.random.default_rng([seed, t, 1])
        request = m.open_slot(rng)
        while request is not None:
            requests.append(request)
            request = m.on_tally(random_tally(request, m, f, rng), rng)
        releases.append(m.close_slot())
    return releases, requests


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


def _same(a: list[Release], b: list[Release]) -> bool:
    return all(
        x.slot == y.slot and x.status == y.status and np.array_equal(x.histogram, y.histogram)
        and np.array_equal(x.spent, y.spent)
        and (x.users_dc, x.users_pub) == (y.users_dc, y.users_pub)
        for x, y in zip(a, b, strict=True)
    )


def _msgpack(blob: dict[str, Any]) -> Any:
    return msgpack.unpackb(msgpack.packb(blob, use_bin_type=True), raw=False, strict_map_key=True)


def check_state_roundtrip(factory: Factory, rng: np.random.Generator) -> None:
    """``state_dict`` survives strict msgpack unchanged, between slots and mid-slot."""
    m = factory()
    drive(m, 7, int(rng.integers(2**32)))
    for moment in ("between slots", "mid-slot"):
        blob = m.state_dict()
        assert _msgpack(blob) == blob, f"state changed through msgpack ({moment})"
        fresh = factory()
        fresh.load_state(_msgpack(blob))
        assert fresh.state_dict() == blob, f"load_state then state_dict differs ({moment})"
        if moment == "between slots":
            m.open_slot(rng)


def check_resume(factory: Factory, rng: np.random.Generator) -> None:
    """Stop after any slot (or mid-slot), load into a fresh instance, continue: same releases."""
    seed = int(rng.integers(2**32))
    slots = 12
    whole, _ = drive(factory(), slots, seed)
    for cut in (1, 5, 9):
        a = factory()
        first, _ = drive(a, cut, seed)
        b = factory()
        b.load_state(_msgpack(a.state_dict()))
        rest, _ = drive(b, slots - cut, seed)
        assert _same(whole, first + rest), f"resuming after slot {cut} changed the releases"


def check_seeded(factory: Factory, rng: np.random.Generator) -> None:
    """Equally seeded instances give identical releases."""
    seed = int(rng.integers(2**32))
    a, _ = drive(factory(), 15, seed)
    b, _ = drive(factory(), 15, seed)
    assert _same(a, b), "equal seeds gave different releases"


def check_window_invariant(factory: Factory, rng: np.random.Generator) -> None:
    """On a long random run no user exceeds ``eps`` in any window of ``w`` slots."""
    m = factory()
    slots = 600
    _, requests = drive(m, slots, int(rng.integers(2**32)))
    problems = window_violations(m, requests, slots)
    assert not problems, "; ".join(problems)


def check_release_shape(factory: Factory, rng: np.random.Generator) -> None:
    """Histogram of length ``d``, budget per group, and a repeat spends no publication budget."""
    m = factory()
    releases, _ = drive(m, 30, int(rng.integers(2**32)))
    for r in releases:
        assert r.histogram.shape == (m.d,), f"histogram shape {r.histogram.shape}"
        assert r.spent.shape == (len(m.groups),), f"spent shape {r.spent.shape}"
        assert r.mechanism == m.name and r.version == m.version
        assert r.users_dc is not None and r.users_pub is not None
        if not r.fresh:
            assert not r.spent_pub.any() and r.users_pub == 0, f"slot {r.slot} repeat spent"


def check_bad_params(factory: Factory, rng: np.random.Generator) -> None:
    """Bad parameters raise ParameterError naming the parameter."""
    cls = type(factory())
    good = cls.test_params()
    bad = {"d": 1, "eps": -1.0, "w": 0, "users": 0, "oracle": "nope", "buckets": 0}
    for name, value in bad.items():
        if name not in good and name not in inspect.signature(cls.__init__).parameters:
            continue
        if name in ("eps", "w") and name not in good:
            continue
        try:
            cls(**{**good, name: value})
        except ParameterError as e:
            assert name in str(e), f"{name}={value!r} raised without naming it: {e}"
        else:
            raise AssertionError(f"{name}={value!r} was accepted")


def check_docstring(factory: Factory, rng: np.random.Generator) -> None:
    """The class docstring has every section of the house style, in order."""
    doc = inspect.getdoc(type(factory())) or ""
    where = [doc.find(f"\n{s}\n{'-' * len(s)}") for s in SECTIONS]
    missing = [s for s, i in zip(SECTIONS, where, strict=True) if i < 0]
    assert not missing, f"missing sections: {missing}"
    assert where == sorted(where), "sections out of order"


def yield_local_checks() -> Iterator[Check]:
    """Every check a local mechanism must pass."""
    yield check_state_roundtrip
    yield check_resume
    yield check_seeded
    yield check_window_invariant
    yield check_release_shape
    yield check_bad_params
    yield check_docstring
