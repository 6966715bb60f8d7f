"""PLDP-IDS privacy invariants I1-I5 (spec seed-002 §4, H11) on long random runs.

Property-based: random personal level mixes (several ``w_i``, several ``eps_i``), every PLDP-IDS
mechanism (OPS on and off, PUE on and off), 10,000 slots each, answered with random tallies
(the adversarial part is the mechanism's decisions). The audit here is per *user* and written
independently of ``app.dp.local.checks``: every request is expanded to the users it asks.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.dp import registry
from app.dp.budget import GroupBudget
from app.dp.local.checks import personal_window_violations
from app.dp.local.ops import ops
from app.dp.local.personal_population import PersonalWindowError
from app.dp.local.wire import Tally, mask_users
from app.dp.types import Group
from tests.dp.pldp.counterexample import paper_split_plpd_plus

SLOTS = 10_000
WITH_OPS = ["plpa+", "plpd+", "plbd-ops", "plba-ops"]
WITHOUT_OPS = ["plpa", "plpd", "plbd-rp", "plba-rp"]

settings.register_profile(
    "pldp-invariant",
    derandomize=True,
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def run_random(m, slots, rng):
    """``slots`` slots answered with random support counts; returns every request."""
    requests = []
    for _ in range(slots):
        request = m.open_slot(rng)
        while request is not None:
            requests.append(request)
            cohort = request.cohort_buckets()
            n = m.population.users_in_levels(cohort)
            if rng.random() < 0.3:  # sometimes a huge change, so the adaptive rules publish
                support = np.outer(n, np.eye(m.d, dtype=np.int64)[rng.integers(m.d)])
            else:
                support = (rng.random((len(n), m.d)) * (n[:, None] + 1)).astype(np.int64)
            request = m.on_tally(Tally(request.slot, request.round, support, n), rng)
        m.close_slot()
    return requests


def per_user_audit(m, requests, slots):
    """I1-I4 per user, from the requests alone; returns a list of problems."""
    level = np.repeat(np.arange(len(m.groups)), m.group_users)
    reported = np.zeros((slots + 1, m.users), dtype=np.int8)
    dc = np.zeros(slots + 1, dtype=np.int64)
    pub = np.zeros(slots + 1, dtype=np.int64)
    units = [{r.units[k] for r in requests} for k in range(len(m.groups))]
    problems = []
    for r in requests:
        asked = mask_users(r, m.users)
        if reported[r.slot, asked].any():
            problems.append(f"slot {r.slot}: a user asked twice in one slot (I4)")
        reported[r.slot, asked] = 1
        (dc if r.round == "dissimilarity" else pub)[r.slot] += int(asked.sum())
    sums = np.cumsum(reported, axis=0, dtype=np.int32)
    for k, g in enumerate(m.groups):
        total, cols = GroupBudget(g).total, level == k
        most = max(units[k], default=0)  # every report of level k spends at most this
        window = sums[g.w :, cols] - sums[: -g.w, cols]  # windows ending at slots w .. T
        head = sums[1 : g.w, cols]  # windows cut at slot 1
        worst = max(int(window.max(initial=0)), int(head.max(initial=0)))
        if worst * most > total:
            problems.append(f"level {k} (w={g.w}): {worst} reports of {most} units > eps (I1)")
        if most * -(-g.w // m.window) > total:
            problems.append(f"level {k}: report budget above eps/ceil(w/W) (I3)")
    at = np.argwhere(reported > 0)
    order = np.lexsort((at[:, 0], at[:, 1]))
    s, u = at[order, 0], at[order, 1]
    if ((u[1:] == u[:-1]) & (np.diff(s) < m.window)).any():
        problems.append(f"a user reported twice within W={m.window} slots (I2/I3)")
    half = m.users // 2
    for name, per_slot in (("dissimilarity", dc), ("publication", pub)):
        c = np.cumsum(per_slot)
        if (c[m.window :] - c[: -m.window] > half).any():
            problems.append(f"more than n/2 {name} users in a window of W slots (I4)")
    return problems


@st.composite
def mechanisms(draw, names):
    name = draw(st.sampled_from(names))
    k = draw(st.integers(3, 5))
    # permutations: even the simplest example mixes distinct windows and budgets
    windows = draw(st.permutations([6, 13, 1, 24, 9, 17, 4]))[:k]
    budgets = draw(st.permutations([0.5, 2.5, 1.0, 0.25, 1.5]))[:k]
    levels = [Group(w, e) for w, e in zip(windows, budgets, strict=True)]
    w_max = max(g.w for g in levels)
    users = [draw(st.integers(5, 60)) for _ in range(k)]
    users[0] += max(0, 2 * w_max - sum(users)) + draw(st.integers(0, 60))
    n = sum(users)
    buckets = draw(st.one_of(st.none(), st.integers(2 * w_max, n)))
    d = draw(st.integers(2, 6))
    return registry.create(name, d=d, groups=levels, users=users, buckets=buckets)


def check_run(m, seed):
    requests = run_random(m, SLOTS, np.random.default_rng(seed))
    assert m.t == SLOTS
    assert per_user_audit(m, requests, SLOTS) == []
    assert personal_window_violations(m, requests) == []
    slots = [r.slot for r in requests]  # I5: only the two rounds of a slot ask anybody
    assert max(np.bincount(slots)) <= 2


@settings(settings.get_profile("pldp-invariant"))
@given(m=mechanisms(WITH_OPS), seed=st.integers(0, 2**32 - 1))
def test_every_user_stays_within_its_own_window_with_ops(m, seed):
    check_run(m, seed)


@settings(settings.get_profile("pldp-invariant"))
@given(m=mechanisms(WITHOUT_OPS), seed=st.integers(0, 2**32 - 1))
def test_every_user_stays_within_its_own_window_without_ops(m, seed):
    check_run(m, seed)


@pytest.mark.parametrize("name", ["plpd+", "plpa+"])
def test_spec_counterexample_paper_split_is_refused_and_safe_split_holds(name):
    # n = 10,269, W = 62, w_i = 125 (spec §3.1): ceil(82/41) = 2 shares, but 3 reports fit
    levels, users = [Group(62, 1.0), Group(125, 1.0)], [10_000, 269]
    params = {"d": 5, "groups": levels, "users": users, "buckets": 256}
    paper = registry.create(name, split_rule="paper_ceil_z", **params)
    assert (paper.window, paper.shares) == (62, (1, 2))
    rng = np.random.default_rng(3)
    with pytest.raises(PersonalWindowError, match="w=125, 2 shares"):
        run_random(paper, SLOTS, rng)  # the ledger stops the third report in 125 slots
    safe = registry.create(name, **params)
    assert (safe.window, safe.shares) == (62, (1, 3))
    requests = run_random(safe, 1_000, np.random.default_rng(3))
    assert per_user_audit(safe, requests, 1_000) == []


def test_audit_catches_the_paper_split_when_nothing_refuses():
    # the same schedule the paper's rule allows, audited without the ledger: 1.5 eps
    m = paper_split_plpd_plus()
    first = m.open_slot(np.random.default_rng(0))
    bucket = int(first.cohort_buckets()[0])
    forged = [
        first.__class__(**{**first.__dict__, "slot": s, "cohort": first.cohort})
        for s in (1, 63, 125)
    ]
    assert bucket in forged[0].cohort_buckets()
    assert any("I1" in p for p in per_user_audit(m, forged, 125))
    assert personal_window_violations(m, forged)


def test_ops_split_always_covers_the_window():
    # adversarial floor collisions: s_i >= ceil(w_i / W) for every level, whatever n
    for n in (1000, 2000, 10_269, 13_216):
        for w_small in (3, 7, 40, 62):
            levels = [Group(w_small, 1.0), Group(2 * w_small + 1, 1.0), Group(3 * w_small, 0.5)]
            users = [n - 200, 100, 100]
            r = ops(levels, users, d=5)
            for g, s in zip(levels, r.shares, strict=True):
                assert s >= -(-g.w // r.window)
