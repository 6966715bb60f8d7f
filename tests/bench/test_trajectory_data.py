"""The (w,n) bench's T-Drive and Diginetica loaders and its figure presets (tiny sizes)."""

from __future__ import annotations

import numpy as np
import pytest

from app.bench.engine.datasets.base import data_root
from app.bench.wn.data import covisit_graph, diginetica, read_diginetica
from app.bench.wn.figs import DEFAULTS, ordering, run, truncated
from app.bench.wn.trajectory import Trajectories
from app.dp.graph import Graph

HAS_DIGINETICA = (data_root() / "diginetica_sample").exists()


def test_covisit_graph_links_each_page_to_its_top_k_co_visited_pages():
    sessions = [[0, 1], [0, 1], [0, 2], [3, 4, 3]]
    g = covisit_graph(sessions, 6, top_k=1)
    assert g.edges() == [[0, 1], [0, 2], [3, 4]]  # 2's best partner is 0; 5 never visited
    assert g.degree()[5] == 0


@pytest.mark.skipif(not HAS_DIGINETICA, reason="no ../shared/data/raw/diginetica_sample")
def test_diginetica_counts_distinct_pages_per_session_clipped_to_l():
    data = diginetica(cap=2)
    views = read_diginetica()
    items = {v[3] for v in views}
    assert data.graph.nodes == len(items) == data.counts.shape[1]
    per_session: dict[int, set[int]] = {}
    for sid, _, _, item in views:
        per_session.setdefault(sid, set()).add(item)
    # released sessions: each adds min(distinct, l) counts; never more than l per session
    assert data.counts.sum() <= 2 * len(per_session)
    assert 0 < data.clipped_share < 1
    assert data.counts.sum(axis=1).max() <= 2 * data.slot_users


def test_presets_run_every_mechanism_on_a_tiny_stream():
    rng = np.random.default_rng(3)
    g = Graph.grid(2, 3)
    data = Trajectories(rng.integers(0, 30, (40, 6)), g, [[0, 1, 3], [2, 4, 5]], 10.0, 0.0, 60)
    rows = run("tiny", truncated(data, 30), quick=True, seeds=1, cap=1)
    assert {r["figure"] for r in rows} == {"fig8", "fig9", "fig10"}
    assert all(r["slots"] == 30 and r["mae"] > 0 for r in rows)
    assert [m for m, _ in ordering(rows, "mae")] and all(
        any(float(r[k]) == v for r in rows) for k, v in DEFAULTS.items()
    )
