"""Privacy invariants of spec seed-003 §3, property-based over random graphs and long streams.

Theorem 5 is checked from the releases' per-page budgets with balls from scipy's APSP, i.e.
independently of the ledger and of its BallMax operator.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from app.dp.budget import within
from app.dp.central.checks import random_stream
from app.dp.errors import InsufficientBudgetError
from app.dp.types import Group
from app.dp.wn import STBD, STR, GraphLedger, RescueDP

from .test_graph import apsp, graphs

SLOTS = 400
profile = settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
levels = st.builds(Group, st.integers(1, 30), st.sampled_from([0.1, 0.5, 1.0, 3.0]))


def window_sums(spent, graph, n, w):
    """(T, centres) sums over the last w slots of the max over W_n(c) of the spent budget."""
    balls = apsp(graph) <= n - 1
    per = np.where(balls[None], spent[:, None, :], 0.0).max(axis=2)
    csum = np.cumsum(np.vstack([np.zeros(per.shape[1]), per]), axis=0)
    return csum[w:] - csum[:-w] if len(per) >= w else csum[-1:]


def run(m, stream, rng):
    return [m.step(c, rng) for c in stream]


@pytest.mark.parametrize("cls", [STBD, STR])
@profile
@given(
    g=graphs(),
    n=st.integers(1, 4),
    group=levels,
    cap=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_theorem5_on_random_graphs(cls, g, n, group, cap, seed):
    graph, edges = g
    rng = np.random.default_rng(seed)
    m = cls(d=graph.nodes, groups=[group], n=n, edges=edges, sensitivity=cap)
    releases = run(m, random_stream(rng, SLOTS, 1, graph.nodes), rng)
    spent = np.array([r.spent_cells for r in releases])
    sums = window_sums(spent, graph, n, group.w)
    assert within(float(sums.max()), group.eps), sums.max()
    if cls is STR:
        assert float(sums.max()) < group.eps  # Theorem 7: strictly below
        assert (spent <= 0.2 * group.eps * (1 + 1e-12)).all()  # eps_max
    fresh = np.array([r.fresh_cells for r in releases])
    hist = np.array([r.histogram for r in releases])
    repeated = ~fresh[1:]
    assert np.array_equal(hist[1:][repeated], hist[:-1][repeated])  # skip: o_t = o_{t-1}
    if cls is STBD:  # §3.2: evaluation exactly eps/(2w) per slot per page; skip: beta = 0
        dc = np.array([r.spent_dc for r in releases])
        assert np.allclose(dc, group.eps / (2 * group.w), rtol=1e-12)
        pub = spent - group.eps / (2 * group.w)
        assert np.allclose(pub[~fresh], 0, atol=1e-15)
        pub_sums = window_sums(pub, graph, n, group.w)
        assert within(float(pub_sums.max()), group.eps / 2)
    else:  # §3.4: unsampled cells spend nothing
        assert (spent[~fresh] == 0).all()


def test_stbd_exponential_decay():
    """§3.3: one page, n = 1, publishing every slot: beta_t = eps / 2**(t+1)."""
    m = STBD(d=1, groups=[Group(50, 2.0)], n=1)
    rng = np.random.default_rng(3)
    spent = [float(m.step([[10**12 * (t % 2)]], rng).spent_pub[0]) for t in range(1, 9)]
    assert spent == [2.0 / 2 ** (t + 1) for t in range(1, 9)]


@pytest.mark.parametrize("cls", [STR, RescueDP])
def test_first_publication_share(cls):
    """§3.4: the first publication gets min(0.2 ln 2, 0.6) eps = 0.1386 eps (units round down)."""
    m = cls(d=4, groups=[Group(20, 0.5)])
    rel = m.step([[3, 1, 4, 1]], np.random.default_rng(0))
    assert rel.fresh_cells.all()
    assert np.allclose(rel.spent_cells, 0.2 * np.log(2) * 0.5, rtol=1e-12)
    assert (rel.spent_cells <= 0.2 * np.log(2) * 0.5).all()


@profile
@given(g=graphs(), w=st.integers(1, 8), seed=st.integers(0, 2**32 - 1))
def test_eta_monotone_in_n_on_a_frozen_ledger(g, w, seed):
    """§3.9: for a fixed spending history, a larger n never gives a page a larger eta."""
    graph, _ = g
    rng = np.random.default_rng(seed)
    history = rng.integers(0, 2**36, (w + 2, graph.nodes))
    etas = []
    for n in range(1, 6):
        ledger = GraphLedger(graph, n, Group(w, 1.0), Fraction(1))
        for row in history:
            ledger._total.append(ledger._phi(row))  # freeze a history, bypassing the limit
            ledger._total_sum = (
                np.sum(ledger._total, axis=0) if ledger._total else ledger._total_sum
            )
        etas.append(ledger.eta())
    assert all((a >= b).all() for a, b in zip(etas, etas[1:], strict=False))


def test_ledger_refuses_before_noise_is_drawn():
    """A mechanism asking for more than a window holds is refused, and no noise is drawn."""
    m = STBD(d=3, groups=[Group(4, 1.0)], n=2, edges=[[0, 1], [1, 2]])
    m.ledger.eta = lambda pub=False: np.full(3, 3 * m.ledger.pub_limit, dtype=np.int64)  # a bug
    rng = np.random.default_rng(5)
    before = rng.bit_generator.state
    with pytest.raises(InsufficientBudgetError, match="window centred at page"):
        m.step([[1, 2, 3]], rng)
    assert rng.bit_generator.state == before and m.t == 0


def test_stbd_calibrates_noise_to_l():
    """§3.7: publication noise has scale l / beta; variance within 6 sd of 2 (l/beta)**2 and a
    scale off by 30% is rejected (Laplace: Var(s^2) ~ 20 b^4 / N)."""
    d, cap = 20_000, 4
    m = STBD(d=d, groups=[Group(10, 1.0)], n=1, sensitivity=cap)
    counts = np.full((1, d), 10**9)
    rel = m.step(counts, np.random.default_rng(11))
    assert rel.fresh_cells.all()
    beta = float(rel.spent_pub[0])
    residual = rel.histogram - counts[0]
    for factor, accept in ((1.0, True), (0.7, False), (1.3, False)):
        b = factor * cap / beta
        z = (residual.var() - 2 * b**2) / np.sqrt(20 * b**4 / d)
        assert (abs(z) < 6) == accept, (factor, z)
