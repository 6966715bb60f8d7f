"""Uniform on the (w,n) ledger (``wn_uniform``): Theorem 5 on random graphs, the noise scale
by hand, and its independence of n (the paper's publish-every-timestamp contrast)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from app.dp.budget import within
from app.dp.central.checks import random_stream
from app.dp.registry import create
from app.dp.types import Group
from app.dp.wn import WNUniform

from .test_graph import graphs
from .test_invariants import levels, profile, run, window_sums


@profile
@given(
    g=graphs(),
    n=st.integers(1, 4),
    group=levels,
    cap=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_theorem5_every_window_spends_exactly_eps(g, n, group, cap, seed):
    """Every (w,n) window of w slots spends at most eps (Theorem 5, balls from APSP, not the
    ledger); once w slots have passed, exactly eps: Uniform wastes nothing."""
    graph, edges = g
    rng = np.random.default_rng(seed)
    m = WNUniform(d=graph.nodes, groups=[group], n=n, edges=edges, sensitivity=cap)
    releases = run(m, random_stream(rng, 3 * group.w + 5, 1, graph.nodes), rng)
    spent = np.array([r.spent_cells for r in releases])
    assert np.allclose(spent, group.eps / group.w, rtol=1e-12)
    assert all(r.fresh_cells.all() for r in releases)
    sums = window_sums(spent, graph, n, group.w)
    assert within(float(sums.max()), group.eps)
    assert np.allclose(sums, group.eps, rtol=1e-9)


def test_noise_scale_by_hand():
    """eps = 1, w = 10, l = 2: each page spends 1/10 and is noised at (1/10)/2 = 1/20, i.e.
    Lap(20), variance 2 * 20**2 = 800; the sample variance over 20,000 pages x 5 slots is
    within 6 sd (Var(s^2) ~ 20 b^4 / N for Laplace) and a scale off by 30% is rejected."""
    d, slots = 20_000, 5
    m = WNUniform(d=d, groups=[Group(10, 1.0)], n=1, sensitivity=2)
    counts = np.full((1, d), 10**6)
    rng = np.random.default_rng(4)
    res = np.array([m.step(counts, rng).histogram - 10**6 for _ in range(slots)])
    var, size = float(res.var()), res.size
    for factor, accept in ((1.0, True), (0.7, False), (1.3, False)):
        b = 20.0 * factor
        sd = math.sqrt(20 * b**4 / size)
        assert (abs(var - 2 * b**2) <= 6 * sd) == accept, (factor, var)


def test_release_does_not_depend_on_n():
    """Under one seed the release is the same for every n: per-page spending is eps / w
    whatever the window, so the n sweep is flat by construction."""
    edges = [[0, 1], [1, 2], [2, 3], [3, 4], [1, 5]]
    stream = random_stream(np.random.default_rng(1), 40, 1, 6)
    outs = []
    for n in range(1, 6):
        m = create("wn_uniform", d=6, groups=[Group(8, 1.0)], n=n, edges=edges)
        rng = np.random.default_rng(2)
        outs.append(np.array([m.step(c, rng).histogram for c in stream]))
    assert all(np.array_equal(outs[0], o) for o in outs[1:])
