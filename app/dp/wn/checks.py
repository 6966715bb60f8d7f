"""Conformance checks of the (w,n) mechanisms (kind ``"graph"``).

They reuse every central check whose meaning carries over (state round trips, determinism,
release shape, input unchanged, bad parameters, docstring) and replace the w-event window
invariant by Theorem 5's (w,n) invariant: for every centre ``c`` and every ``w`` slots, the sum
over slots of the max over ``W_n(c)`` of the budget spent per page is at most ``eps``. The balls
come from breadth-first hop distances, independently of the ledger's ``BallMax`` operator.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from app.dp.budget import within
from app.dp.checks import (
    Check,
    Factory,
    check_bad_params,
    check_docstring,
    check_input_unchanged,
    check_release_shape,
    check_seeded_determinism,
    check_state_msgpack,
    check_state_refuses_other_params,
    check_state_roundtrip,
    random_groups,
    random_stream,
)
from app.dp.graph import Graph
from app.dp.types import Group
from app.dp.wn.base import GraphRelease


def hop_balls(graph: Graph, n: int) -> npt.NDArray[np.bool_]:
    """``balls[c, m]``: page ``m`` lies in the n-range window centred at ``c`` (BFS)."""
    dist = np.array([graph.hop_distances(c) for c in range(graph.nodes)])
    return (dist >= 0) & (dist <= n - 1)


def wn_violations(
    releases: list[GraphRelease], graph: Graph, n: int, groups: list[Group]
) -> list[str]:
    """Every (group, centre, window) over its ``eps_g``; empty when Theorem 5 holds."""
    spent = np.array([r.spent_cells for r in releases])  # (T, d)
    balls = hop_balls(graph, n)
    per_window = np.where(balls[None, :, :], spent[:, None, :], 0.0).max(axis=2)  # (T, centres)
    bad = []
    for g, group in enumerate(groups):
        kernel = np.ones(group.w)
        sums = np.array([np.convolve(col, kernel)[: len(releases)] for col in per_window.T])
        c, t = np.unravel_index(int(np.argmax(sums)), sums.shape)
        if not within(float(sums[c, t]), group.eps):
            bad.append(
                f"group {g} {group}: window at page {c} ending at slot {t + 1} spent {sums[c, t]}"
            )
    return bad


def check_wn_window_invariant(factory: Factory, rng: np.random.Generator) -> None:
    """On a long random stream with a random group mix, Theorem 5 holds for every group."""
    groups = random_groups(rng)
    m = factory(groups=groups)
    releases = [m.step(c, rng) for c in random_stream(rng, 600, len(groups), m.d)]
    bad = wn_violations(releases, m.graph, m.n, groups)
    assert not bad, bad


def check_cells(factory: Factory, rng: np.random.Generator) -> None:
    """Per-page spending and freshness: a repeated page keeps its output and spends no
    publication budget beyond what every page spends."""
    m = factory()
    stream = random_stream(rng, 100, len(m.groups), m.d)
    previous = np.zeros(m.d)
    for counts in stream:
        r = m.step(counts, rng)
        cells, fresh = r.spent_cells, r.fresh_cells
        assert cells.shape == (m.d,) and fresh.shape == (m.d,)
        assert np.array_equal(r.histogram[~fresh], previous[~fresh])
        assert np.isclose(cells.max(), r.spent[0]), (cells, r.spent)
        if (~fresh).any():
            assert np.allclose(cells[~fresh], r.spent_dc[0]), "a repeated page spent publication"
        previous = r.histogram


GRAPH_CHECKS: tuple[Check, ...] = (
    check_state_msgpack,
    check_state_roundtrip,
    check_state_refuses_other_params,
    check_seeded_determinism,
    check_release_shape,
    check_input_unchanged,
    check_wn_window_invariant,
    check_cells,
    check_bad_params,
    check_docstring,
)


def yield_graph_checks() -> Iterator[Check]:
    """The checks every registered (w,n) mechanism passes."""
    yield from GRAPH_CHECKS


__all__ = ["GRAPH_CHECKS", "hop_balls", "wn_violations", "yield_graph_checks"]
