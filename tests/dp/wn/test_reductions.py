"""Reductions of seed-003 (spec §3.8, issue 14): STBD over the whole graph spends as BD;
STR with n = 1 is RescueDP; a one-node graph is plain w-event privacy."""

from __future__ import annotations

import numpy as np
import pytest

from app.dp.central import BD
from app.dp.central.checks import random_stream, window_violations
from app.dp.checks import same_releases
from app.dp.graph import Graph
from app.dp.types import Group
from app.dp.wn import STBD, STR, RescueDP

SLOTS = 3000


def scripted(m, decisions, graph_kind):
    """Let an adversary take every publish/skip decision (as tests/dp/test_invariants.py)."""
    if graph_kind:
        m._publishes = lambda a_err, p_err: np.full(m.d, bool(decisions[m.t]))
    else:
        m._publishes = lambda dis, threshold: bool(decisions[m.t])
    return m


@pytest.mark.parametrize(
    ("graph", "n", "cap", "groups"),
    [
        (Graph.grid(3, 4, 4), 6, 1, [Group(12, 1.0)]),  # diameter 5: n = 6 covers the graph
        (Graph.grid(3, 4, 8), 4, 3, [Group(30, 0.5), Group(7, 2.0)]),  # diameter 3
        (Graph(1), 1, 2, [Group(5, 1.0)]),  # one node
    ],
)
def test_stbd_over_the_whole_graph_spends_and_releases_as_bd(graph, n, cap, groups):
    """Same decisions: the same spending at every slot (exact), the same fresh slots, a
    skipped slot repeating the last release, and fresh releases with the same noise: the mean
    |release - truth| over the fresh cells of the two agrees within 5 standard errors (each
    draws from its own generator, so the draws differ; a wrong scale, e.g. a page-level
    sensitivity, moves the mean by a factor)."""
    rng = np.random.default_rng(7)
    decisions = rng.random(SLOTS) < 0.4
    d = graph.nodes
    bd = scripted(BD(d=d, groups=groups, sensitivity=cap), decisions, False)
    stbd = scripted(
        STBD(d=d, groups=groups, n=n, edges=graph.edges(), sensitivity=cap), decisions, True
    )
    counts = np.full((len(groups), d), 5)
    truth = counts.sum(axis=0)
    ra, rb = np.random.default_rng(11), np.random.default_rng(12)
    errors: tuple[list[float], list[float]] = ([], [])
    last: list[np.ndarray | None] = [None, None]
    for _ in range(SLOTS):
        a, b = bd.step(counts, ra, [5 * d] * len(groups)), stbd.step(counts, rb)
        assert a.status == b.status
        assert np.array_equal(a.spent_dc, b.spent_dc) and np.array_equal(a.spent_pub, b.spent_pub)
        assert np.allclose(b.spent_cells, b.spent[0], rtol=1e-12)  # one ledger for all pages
        assert a.fresh == b.fresh and bool(b.fresh_cells.all()) == b.fresh
        for i, r in enumerate((a, b)):
            if r.fresh:
                errors[i].extend(np.abs(r.histogram - truth))
            elif last[i] is not None:
                assert np.array_equal(r.histogram, last[i])  # approximation: the last release
            last[i] = r.histogram
    ea, eb = np.array(errors[0]), np.array(errors[1])
    assert len(ea) == len(eb) > 100
    se = np.sqrt(ea.var(ddof=1) / len(ea) + eb.var(ddof=1) / len(eb))
    assert abs(ea.mean() - eb.mean()) < 5 * se, (ea.mean(), eb.mean(), se)


def test_str_with_n_1_is_rescuedp():
    """Bit for bit with a shared seed: STR(n = 1) on any graph = RescueDP (place level)."""
    d, groups = 9, [Group(20, 1.0), Group(8, 0.4)]
    for cap in (1, 5):
        stream = random_stream(np.random.default_rng(cap), 500, len(groups), d)
        s = STR(d=d, groups=groups, n=1, grid=[3, 3], neighbours=8, sensitivity=cap)
        r = RescueDP(d=d, groups=groups, sensitivity=cap)
        a = [s.step(c, rng) for rng in [np.random.default_rng(3)] for c in stream]
        b = [r.step(c, rng) for rng in [np.random.default_rng(3)] for c in stream]
        assert same_releases(a, b)
        assert all(np.array_equal(x.spent_cells, y.spent_cells) for x, y in zip(a, b, strict=True))
        assert any(not x.fresh_cells.all() for x in a)  # pages do skip (adaptive sampling)


@pytest.mark.parametrize("cls", [STBD, STR, RescueDP])
def test_one_node_graph_is_plain_w_event(cls):
    """d = 1: the (w,n) window is the w-event window; the central checker's invariant holds."""
    groups = [Group(6, 1.0), Group(3, 0.3)]
    m = cls(d=1, groups=groups) if cls is RescueDP else cls(d=1, groups=groups, n=3)
    rng = np.random.default_rng(9)
    releases = [m.step(c, rng) for c in random_stream(rng, 2000, len(groups), 1)]
    assert not window_violations(releases, groups)
    spent = np.array([r.spent_cells[0] for r in releases])
    assert np.allclose(spent, [r.spent[0] for r in releases], rtol=1e-12)
