"""The public graph and its window operators (spec seed-003 §A0), against scipy's APSP."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from app.dp.errors import ParameterError
from app.dp.graph import Graph

profile = settings(max_examples=60, deadline=None, derandomize=True)


@st.composite
def graphs(draw, max_nodes=14):
    nodes = draw(st.integers(1, max_nodes))
    pair = st.tuples(st.integers(0, nodes - 1), st.integers(0, nodes - 1))
    edges = draw(st.lists(pair, max_size=3 * nodes))
    return Graph(nodes, edges), edges


def apsp(graph: Graph) -> np.ndarray:
    """Independent hop distances: scipy's unweighted shortest paths (inf if unreachable)."""
    n = graph.nodes
    adj = csr_matrix((np.ones(graph.indices.size), graph.indices, graph.indptr), shape=(n, n))
    return shortest_path(adj, unweighted=True, directed=False)


@profile
@given(g=graphs(), radius=st.integers(0, 6), seed=st.integers(0, 2**32 - 1))
def test_ball_operators_match_apsp(g, radius, seed):
    graph, _ = g
    a = np.random.default_rng(seed).integers(-50, 50, graph.nodes)
    balls = apsp(graph) <= radius
    expect_max = np.where(balls, a[None, :], np.iinfo(np.int64).min).max(axis=1)
    expect_min = np.where(balls, a[None, :], np.iinfo(np.int64).max).min(axis=1)
    assert np.array_equal(graph.ball_max(a, radius), expect_max)
    assert np.array_equal(graph.ball_min(a, radius), expect_min)


@profile
@given(g=graphs())
def test_hop_distances_match_apsp(g):
    graph, _ = g
    d = apsp(graph)
    for c in range(graph.nodes):
        mine = graph.hop_distances(c).astype(float)
        mine[mine < 0] = np.inf
        assert np.array_equal(mine, d[c])


def test_edges_are_symmetric_deduplicated_and_loop_free():
    g = Graph(4, [[0, 1], [1, 0], [2, 2], [1, 3], [0, 1]])
    assert g.edges() == [[0, 1], [1, 3]]
    assert g.degree().tolist() == [1, 2, 0, 1]


@pytest.mark.parametrize(
    ("rows", "cols", "neighbours", "edges", "max_degree"),
    [(3, 4, 4, 3 * 3 + 2 * 4, 4), (3, 4, 8, 3 * 3 + 2 * 4 + 2 * 2 * 3, 8), (1, 5, 8, 4, 2)],
)
def test_grid(rows, cols, neighbours, edges, max_degree):
    g = Graph.grid(rows, cols, neighbours)
    assert (g.nodes, g.edge_count, int(g.degree().max())) == (rows * cols, edges, max_degree)
    d = apsp(g)
    r, c = np.divmod(np.arange(rows * cols), cols)
    dr, dc = np.abs(r[:, None] - r[None, :]), np.abs(c[:, None] - c[None, :])
    expected = dr + dc if neighbours == 4 else np.maximum(dr, dc)  # Manhattan / Chebyshev
    assert np.array_equal(d, expected)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"d": 6, "grid": [2, 3]}, None),
        ({"d": 6, "grid": [2, 2]}, "grid 2 x 2 has 4 cells but d is 6"),
        ({"d": 6, "grid": [2, 3], "edges": [[0, 1]]}, "either edges or grid"),
        ({"d": 3, "edges": [[0, 3]]}, "edges must join nodes in 0..2"),
        ({"d": 0}, "d \\(graph nodes\\)"),
        ({"d": 4, "grid": [2, 2], "neighbours": 6}, "neighbours must be 4 or 8"),
    ],
)
def test_from_config(kwargs, match):
    if match is None:
        assert Graph.from_config(**kwargs).nodes == kwargs["d"]
    else:
        with pytest.raises(ParameterError, match=match):
            Graph.from_config(**kwargs)


def test_large_radius_is_the_component_max():
    g = Graph(5, [[0, 1], [1, 2], [3, 4]])
    assert g.ball_max(np.array([1, 2, 3, 9, 4]), 100).tolist() == [3, 3, 3, 9, 9]
