"""Neighbouring pairs differ in one user, inside one window, by the relation's L1 distance."""

from __future__ import annotations

import numpy as np
import pytest

from app.audit.pairs import (
    ball_pages,
    boundary_level,
    central_pair,
    graph_cells,
    local_pair,
    period_pair,
)
from app.dp.graph import Graph
from app.dp.local import LPU
from app.dp.types import Group

GROUPS = (Group(3, 1.0), Group(2, 0.5))


@pytest.mark.parametrize("scenario", ["boundary", "jumps"])
@pytest.mark.parametrize(("relation", "l1"), [("add/remove", 1), ("replace", 2)])
@pytest.mark.parametrize("group", [0, 1])
def test_pair_differs_in_one_user_of_one_group_inside_one_window(scenario, relation, l1, group):
    pair = central_pair(relation, scenario, group, GROUPS, 2, level=7)
    diff = pair.a - pair.b
    w = GROUPS[group].w
    changed = np.flatnonzero(np.abs(diff).sum(axis=(1, 2)))
    assert changed.tolist() == list(range(pair.prefix, pair.prefix + w))  # exactly one window
    assert (np.abs(diff).sum(axis=(1, 2))[changed] == l1).all()  # the relation's L1 distance
    assert (np.delete(diff, group, axis=1) == 0).all()  # only the target's group
    assert (pair.a >= 0).all() and (pair.b >= 0).all()
    assert pair.sensitivity == l1
    # the target is counted once per slot on A (and on B under replace)
    assert (pair.a[changed].sum(axis=(1, 2)) - pair.b[changed].sum(axis=(1, 2)) == 2 - l1).all()


def test_jumps_play_w_minus_one_slots_before_the_window():
    pair = central_pair("add/remove", "jumps", 0, GROUPS, 2)
    assert pair.prefix == 2 and pair.a.shape[0] == 2 + 3 + 1


def test_boundary_level_finds_the_last_level_below_one_half():
    # a mechanism publishing iff n > 12 (BA at w = 3, eps = 1, d = 2 without DC noise)
    calls = []

    def publishes(level, probes):
        calls.append(level)
        return float(level > 12)

    assert boundary_level(publishes, 8) == 12
    assert len(calls) < 12
    assert boundary_level(lambda n, p: 1.0, 8) == 0  # always publishes: no boundary
    assert boundary_level(lambda n, p: 0.0, 8, cap=64) == 64


def test_local_pair_targets_the_first_device_of_the_group():
    m = LPU(d=2, eps=1.0, w=3, users=12)
    pair = local_pair(m, 0)
    assert (pair.target, pair.a, pair.b, pair.slots) == (0, 0, 1, 3)
    assert pair.values("A") == 0 and pair.values("B") == 1


@pytest.mark.parametrize("relation", ["add/remove", "replace"])
@pytest.mark.parametrize(
    ("group", "placement", "changed"),
    [
        (0, "straddle", [2, 3, 4]),  # w = 3 over periods of 3: slots 3..5, across the boundary
        (1, "straddle", [2, 3]),  # w = 2: the last slot of period 1, the first of period 2
        (0, "sampled", [2, 3]),  # only the two slots the sampler always measures
        (0, "aligned", [0, 1, 2]),  # inside period 1
    ],
)
def test_period_pairs_change_one_user_where_the_loss_concentrates(
    relation, group, placement, changed
):
    pair = period_pair(relation, placement, group, GROUPS, 2, period=3)
    diff = np.abs(pair.a - pair.b).sum(axis=(1, 2))
    assert np.flatnonzero(diff).tolist() == changed
    assert (diff[changed] == pair.sensitivity).all() and pair.prefix == 0
    assert pair.a.shape[0] % 3 == 0  # whole periods: every slot is released
    assert max(changed) - min(changed) < GROUPS[group].w  # inside one window of the group
    assert pair.b.sum(axis=1).min() >= 99  # released cells far from 0: none truncated


def test_graph_cells_stay_in_one_spatial_window():
    # the stbd test graph: 0-1-2-3-4 and 1-5; n = 2 windows hold the pages within 1 hop
    graph = Graph(6, [[0, 1], [1, 2], [2, 3], [3, 4], [1, 5]])
    pages = ball_pages(graph.hop_distances(1), 2)
    assert pages[0] == 1 and sorted(pages) == [0, 1, 2, 5]
    assert graph_cells(pages, 2, "add/remove") == ((1, 0), ())
    cells_a, cells_b = graph_cells(pages, 2, "replace")
    assert set(cells_a).isdisjoint(cells_b) and set(cells_a + cells_b) <= set(pages)
    assert ball_pages(graph.hop_distances(1), 1) == [1]  # n = 1: one page, no replace
    assert graph_cells([1], 2, "replace") is None and graph_cells([1], 2, "add/remove") == (
        (1,),
        (),
    )
    pair = central_pair("replace", "jumps", 0, GROUPS, 6, cells_a=cells_a, cells_b=cells_b)
    assert pair.sensitivity == 4  # 2 l
    assert (np.abs(pair.a - pair.b).sum(axis=(1, 2))[pair.prefix : pair.prefix + 3] == 4).all()
