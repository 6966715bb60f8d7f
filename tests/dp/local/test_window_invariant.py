"""Invariant 2 (docs/design.md): no user reports beyond ``eps`` in any window of ``w`` slots.

Property-based over mechanisms and parameters, each example a run of 10,000 slots with random
answers (the adversarial part is the mechanism's decisions, not the reports): population
division asks every user at most once in every window of ``w`` slots and never recycles a
bucket early; budget division spends at most ``eps`` per window, in exact units.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.dp import registry
from app.dp.local.checks import window_violations
from app.dp.local.wire import Tally
from app.dp.types import Group

SLOTS = 10_000

settings.register_profile(
    "local-invariant",
    derandomize=True,
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def run_random(m, slots, rng):
    """``slots`` slots answered with random support counts; returns every request."""
    requests = []
    sizes = m.population.sizes
    for _ in range(slots):
        request = m.open_slot(rng)
        while request is not None:
            requests.append(request)
            cohort = request.cohort_buckets()
            n = m.group_users if cohort is None else [int(sizes[cohort].sum())]
            jump = rng.random() < 0.3  # sometimes a huge change, so adaptive ones publish
            spike = np.eye(m.d, dtype=int)[rng.integers(m.d)]
            support = [spike * k if jump else rng.integers(0, k + 1, m.d) for k in n]
            request = m.on_tally(Tally(request.slot, request.round, support, n), rng)
        m.close_slot()
    return requests


@st.composite
def mechanisms(draw):
    name = draw(st.sampled_from(registry.names("local")))
    w = draw(st.integers(1, 9))
    if name == "plbu":
        k = draw(st.integers(1, 3))
        eps = st.sampled_from([0.5, 1.0, 2.0])
        groups = [Group(draw(st.integers(1, 9)), draw(eps)) for _ in range(k)]
        users = [draw(st.integers(1, 20)) for _ in range(k)]
        return registry.create(name, d=3, groups=groups, users=users)
    users = draw(st.integers(2 * w, 6 * w + 20))
    buckets = draw(st.one_of(st.none(), st.integers(2 * w, users)))
    eps = draw(st.sampled_from([0.5, 1.0, 3.0]))
    d = draw(st.integers(2, 5))
    return registry.create(name, d=d, eps=eps, w=w, users=users, buckets=buckets)


@settings(settings.get_profile("local-invariant"))
@given(m=mechanisms(), seed=st.integers(0, 2**32 - 1))
def test_no_user_exceeds_eps_in_any_window(m, seed):
    requests = run_random(m, SLOTS, np.random.default_rng(seed))
    assert m.t == SLOTS
    assert window_violations(m, requests, SLOTS) == []


def test_checker_catches_a_bucket_asked_twice_in_a_window():
    m = registry.create("lpu", d=2, eps=1.0, w=3, users=9)
    requests = run_random(m, 6, np.random.default_rng(0))
    early = requests[0].__class__(**{**requests[0].__dict__, "slot": 2})  # slot 1's cohort again
    assert window_violations(m, [*requests, early], 6)


def test_checker_catches_budget_over_eps():
    m = registry.create("lbu", d=2, eps=1.0, w=3, users=9)
    requests = run_random(m, 6, np.random.default_rng(0))
    twice = requests[2]
    assert window_violations(m, [*requests, twice], 6)


def test_recycling_happens_exactly_after_the_window():
    m = registry.create("lpu", d=2, eps=1.0, w=4, users=40)
    requests = run_random(m, 40, np.random.default_rng(1))
    seen = {}
    for r in requests:
        for b in r.cohort_buckets().tolist():
            if b in seen:
                assert r.slot - seen[b] == 4
            seen[b] = r.slot
