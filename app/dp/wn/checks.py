"""The conformance adapter of the (w,n) mechanisms (kind ``"graph"``).

The checks of :mod:`app.dp.checks` drive them as central mechanisms (a slot's input is its
counts per group), with two differences: the w-event window invariant is replaced by Theorem
5's (w,n) invariant: for every centre ``c`` and every ``w`` slots, the sum over slots of the
max over ``W_n(c)`` of the budget spent per page is at most ``eps``, the balls coming from
breadth-first hop distances, independently of the ledger's ``BallMax`` operator; and every
release also has its per-page spending and freshness checked (:meth:`GraphAdapter.check_release`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.budget import within
from app.dp.central.checks import Central
from app.dp.checks import Trace
from app.dp.graph import Graph
from app.dp.types import Group, Release
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


class GraphAdapter(Central):
    """(w,n) mechanisms: central inputs, Theorem 5's invariant, per-page release rules."""

    invariant_slots = 600

    def window_violations(self, m: Any, trace: Trace, groups: list[Group]) -> list[str]:
        releases: list[Any] = trace.releases
        return wn_violations(releases, m.graph, m.n, groups)

    def check_release(self, m: Any, r: Release, previous: npt.NDArray[np.float64]) -> None:
        """Per-page spending and freshness: a repeated page keeps its output and spends no
        publication budget beyond what every page spends."""
        assert isinstance(r, GraphRelease), type(r)
        cells, fresh = r.spent_cells, r.fresh_cells
        assert cells.shape == (m.d,) and fresh.shape == (m.d,)
        assert np.array_equal(r.histogram[~fresh], previous[~fresh]), "a repeated page changed"
        assert np.isclose(cells.max(), r.spent[0]), (cells, r.spent)
        if (~fresh).any():
            assert np.allclose(cells[~fresh], r.spent_dc[0]), "a repeated page spent publication"


GRAPH = GraphAdapter()


__all__ = ["GRAPH", "hop_balls", "wn_violations"]
