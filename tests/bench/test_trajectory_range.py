"""Table 1 (spatial ranges, Definition 5) on a hand-made graph whose answers are derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

from app.bench.engine.datasets.base import data_root
from app.bench.wn.spatial_range import (
    NS,
    UNREACHABLE,
    Ranges,
    Visits,
    diginetica_users,
    markdown,
    range_table,
    window_pages,
)
from app.dp.graph import Graph

# 0 - 1 - 2 - 3 - 4      (a path)
#         |
#         5              (a leaf on 2)        6 (isolated)
GRAPH = Graph(7, [(0, 1), (1, 2), (2, 3), (3, 4), (2, 5)])


@pytest.mark.parametrize(
    ("pages", "expected"),
    [
        ([0], 0),  # one page: itself is the centre
        ([0, 1], 1),  # adjacent pages: either one is a centre at 1 hop
        ([0, 4], 2),  # ends of the path: centre 2, which is not in the trajectory
        ([1, 3, 5], 1),  # the three neighbours of 2
        ([0, 5], 2),  # d(0, 5) = 3, odd: the best centre (1 or 2) is 2 hops from one end
        ([0, 4, 5], 2),  # centre 2 again; every other centre is >= 3 from 0 or 4
        ([0, 6], UNREACHABLE),  # another component: no centre
    ],
)
def test_spatial_range_is_the_graph_1_centre_radius(pages, expected):
    assert Ranges(GRAPH).spatial_range(pages) == expected


def test_window_pages_starts_at_the_users_first_slot():
    visits: Visits = [(3, [0]), (5, [4, 0]), (9, [6])]
    assert window_pages(visits, 1) == [0]
    assert window_pages(visits, 3) == [0, 4]  # slots 3, 4, 5
    assert window_pages(visits, 6) == [0, 4]  # slots 3..8
    assert window_pages(visits, 7) == [0, 4, 6]  # slots 3..9


def test_range_table_is_cumulative_with_other_components_apart():
    users: list[Visits] = [
        [(3, [0]), (5, [4, 0]), (9, [6])],  # ranges by w = 1, 3, 7: 0, 2, other component
        [(0, [1, 3, 5])],  # 1, 1, 1
        [(2, [0]), (3, [1])],  # 0, 1, 1
        [(0, [0]), (1, [5])],  # 0, 2, 2
    ]
    table = range_table(Ranges(GRAPH), users, ws=(1, 3, 7))
    rest = len(NS) - 3  # n = 3..8
    np.testing.assert_allclose(table[1], [75, 100, 100, *[100] * rest, 0])
    np.testing.assert_allclose(table[3], [0, 50, 100, *[100] * rest, 0])
    np.testing.assert_allclose(table[7], [0, 50, 75, *[75] * rest, 25])
    text = markdown(table).splitlines()
    assert text[0] == "| n \\ w | 1 | 3 | 7 |"
    assert text[2] == "| 0 | 75.00 | 0.00 | 0.00 |"
    assert text[-1] == "| other component | 0.00 | 0.00 | 25.00 |"


def test_spatial_range_refuses_an_empty_trajectory():
    with pytest.raises(ValueError, match="at least one page"):
        Ranges(GRAPH).spatial_range([])


@pytest.mark.skipif(
    not (data_root() / "diginetica_sample").exists(),
    reason="no ../shared/data/raw/diginetica_sample",
)
def test_diginetica_users_are_released_sessions_clipped_to_l():
    graph, users = diginetica_users(cap=2)
    assert graph.nodes == 7139
    assert users and all(len(v) == 1 and 1 <= len(v[0][1]) <= 2 for v in users)
    assert any(len(v[0][1]) == 2 for v in users)
