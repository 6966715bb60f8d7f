"""The generated (w,n) trajectory streams: seeded, shaped like the sets they stand in for."""

from __future__ import annotations

import numpy as np
import pytest

from app.bench.wn import generated as gen
from app.bench.wn.generated import GENERATED, click_sessions, gen_clicks, gen_taxis


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_streams_are_seeded(name: str) -> None:
    a, b = GENERATED[name](5), GENERATED[name](5)
    assert np.array_equal(a.counts, b.counts) and a.process_var == b.process_var


def test_click_sessions_have_the_documented_length_and_skew() -> None:
    n = 20_000
    sessions = click_sessions(n, seed=3)
    lengths = np.array([len(s) for s in sessions])
    assert lengths.min() >= 1 and lengths.max() <= gen.MAX_CLICKS
    # Geometric(1/4.7) truncated at 40: mean 4.7 up to 1e-3; sd sqrt((1 - p) / p^2) ~ 4.2
    tolerance = 5 * np.sqrt((1 - 1 / gen.MEAN_CLICKS) * gen.MEAN_CLICKS**2 / n)
    assert abs(lengths.mean() - gen.MEAN_CLICKS) < tolerance
    firsts = np.bincount([s[0] for s in sessions], minlength=gen.CATEGORIES) / n
    pop = 1 / np.arange(1, gen.CATEGORIES + 1) ** gen.ZIPF
    # the first click follows the Zipf popularity: 5 binomial sds per category
    assert np.all(np.abs(firsts - pop / pop.sum()) < 5 * np.sqrt(0.25 / n))
    steps = [(a, b) for s in sessions for a, b in zip(s, s[1:], strict=False)]
    stays = np.mean([a == b for a, b in steps])
    assert abs(stays - gen.STAY) < 5 * np.sqrt(0.25 / len(steps))
    moves = {(a, b) for a, b in steps if a != b}  # along the hidden graph only
    assert len(moves) <= 2 * gen.LINKS * gen.CATEGORIES


def test_gen_clicks_fills_each_slot_evenly_within_the_clip() -> None:
    data = gen_clicks(cap=2, slots=48)
    assert data.counts.shape == (48, gen.CATEGORIES) and data.graph.nodes == gen.CATEGORIES
    per_slot = data.counts.sum(axis=1)
    assert per_slot.min() >= data.slot_users - 1  # every session visits one page at least
    assert np.all(per_slot <= 2 * data.slot_users)  # at most l = 2 pages a session
    assert 0 < data.clipped_share < 1 and data.process_var > 0


def test_gen_taxis_stay_on_the_grid_within_the_clip_and_follow_the_day() -> None:
    data = gen_taxis(cap=3, slots=288)
    assert data.counts.shape == (288, gen.GRID**2)
    assert data.slot_users == gen.TAXIS - gen.TAXIS // 10
    assert data.counts.sum(axis=1).max() <= 3 * data.slot_users
    hour = (np.arange(288) % 144) / 6
    busy = data.counts.sum(axis=1)
    assert busy[(hour >= 13) & (hour < 17)].mean() > 2 * busy[(hour >= 2) & (hour < 6)].mean()
    centre = data.counts.reshape(288, gen.GRID, gen.GRID)[:, 3:7, 3:7].sum()
    assert centre > 0.16 * data.counts.sum() * 1.5  # the 4 x 4 centre: 16% of the cells
    assert data.graph.edge_count == 2 * 9 * 10 + 2 * 9 * 9  # the 8-neighbour grid
