"""RescueDP's dynamic grouping (``rescuedp_g``): every page's window stays below eps, the
groups by hand, the group's noise, and the reduction to RescueDP when nothing groups."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from app.dp.central.checks import random_stream
from app.dp.graph import Graph
from app.dp.types import Group
from app.dp.wn import RescueDP, RescueDPGrouped
from app.dp.wn.rescuedp_grouping import dynamic_groups

from .test_invariants import levels, profile, window_sums


@profile
@given(
    d=st.integers(2, 12),
    group=levels,
    cap=st.integers(1, 3),
    scale=st.sampled_from([3, 30, 3000]),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_page_window_stays_below_eps(d, group, cap, scale, seed):
    """Place level (n = 1): every page's w-slot sum stays strictly below eps (Theorem 7), a
    group's members spend the same (the least allotment), and a page never spends more than
    eps_max; small counts make groups form."""
    rng = np.random.default_rng(seed)
    m = RescueDPGrouped(
        d=d, groups=[group], sensitivity=cap, theta=1.0, tau1=1e9, tau3=1e9, tau2=-1.0
    )
    stream = random_stream(rng, 300, 1, d) % scale
    grouped = 0
    spent = []
    for c in stream:
        rel = m.step(c, rng)
        spent.append(rel.spent_cells)
        leader = m.last_groups
        members = rel.fresh_cells & (leader != np.arange(d))
        grouped += int(members.sum())
        for page in np.flatnonzero(members):
            assert rel.spent_cells[page] == rel.spent_cells[leader[page]]
    spent_a = np.array(spent)
    sums = window_sums(spent_a, Graph(d), 1, group.w)
    assert float(sums.max()) < group.eps
    assert (spent_a <= 0.2 * group.eps * (1 + 1e-12)).all()
    assert grouped > 0  # tau2 = -1 and huge tau1, tau3: every due page with history groups


def test_groups_by_hand():
    """tau1 = 30, tau2 = 0.5, tau3 = 25. Predictions 2, 4, 10, 20, 28 (increasing order):
    page 0 (2) pivots; page 1 (4) is within 25, the sum 6 < 30, correlated: joins; page 2
    (10): sum 16 < 30, joins; page 3 (20): sum 36 >= 30, stays; page 4 (28) is within 25 of
    2 but falls while page 0 rises: stays. Then page 3 pivots and takes page 4? 20 + 28 = 48
    >= 30: no. Groups {0, 1, 2}, {3}, {4}."""
    pred = np.array([2.0, 4.0, 10.0, 20.0, 28.0])
    recent = np.array(
        [[1, 2, 3], [3, 4, 5], [9, 10, 11], [19, 20, 21], [29, 28, 27]], dtype=np.float64
    )
    leader = dynamic_groups(pred, recent, np.arange(5), 30.0, 0.5, 25.0)
    assert leader.tolist() == [0, 0, 0, 3, 4]
    # a flat history correlates with nothing, and a non-candidate is never touched
    recent[1] = 4.0
    assert dynamic_groups(pred, recent, np.array([0, 1, 2]), 30.0, 0.5, 25.0).tolist() == [
        0,
        1,
        0,
        3,
        4,
    ]


def test_group_noise_is_one_draw_on_the_sum():
    """Three grouped pages at eps = 1, w = 10, l = 2, theta = 0 (a sample every slot):
    after kappa = 3 slots they share one noisy sum, so their observations are equal, and
    the sum's residual has the Laplace variance 2 (l / u_g)**2 at the group's budget u_g."""
    residuals, budgets = [], []
    for seed in range(400):
        m = RescueDPGrouped(
            d=3, groups=[Group(10, 1.0)], theta=0.0, sensitivity=2, tau1=1e9, tau3=1e9, tau2=-1
        )
        rng = np.random.default_rng(seed)
        obs: dict[str, np.ndarray] = {}
        inner = m._perturb

        def spy(r, sampled, units, rng, inner=inner, obs=obs):
            out = inner(r, sampled, units, rng)
            obs["z"], obs["units"] = out[1], out[0]
            return out

        m._perturb = spy  # type: ignore[method-assign]
        for t in range(4):
            counts = np.array([[10 + t, 20 + t, 30 + t]])
            m.step(counts, rng)
        assert len(set(m.last_groups.tolist())) == 1  # one group (its pivot: the least)
        z = obs["z"]
        assert z[0] == z[1] == z[2]
        u = m.eps_of(obs["units"])
        assert u[0] == u[1] == u[2]
        budgets.append(float(u[0]))
        residuals.append(3 * z[0] - counts.sum())
    b = 2 / np.array(budgets)  # Laplace scale l / u_g
    standardised = np.array(residuals) / b  # Lap(1): variance 2
    sd = math.sqrt(20 / len(standardised))  # Var(x^2) = 24 - 4 = 20 for Lap(1)
    assert abs(float((standardised**2).mean()) - 2) <= 6 * sd


def test_without_groups_it_is_rescuedp():
    """tau1 = 0: nothing is a candidate, every page publishes alone, bit for bit RescueDP."""
    stream = random_stream(np.random.default_rng(3), 200, 1, 5)
    a = RescueDP(d=5, groups=[Group(20, 1.0)], process_var=50.0)
    b = RescueDPGrouped(d=5, groups=[Group(20, 1.0)], process_var=50.0, tau1=0.0)
    ra, rb = np.random.default_rng(9), np.random.default_rng(9)
    for c in stream:
        x, y = a.step(c, ra), b.step(c, rb)
        assert np.array_equal(x.histogram, y.histogram)
        assert np.array_equal(x.spent_cells, y.spent_cells)
