"""Smoke test of the (w,n) benchmark on a tiny hand-made msnbc-format fixture."""

from __future__ import annotations

import zipfile

import numpy as np

from app.bench.wn import trajectory
from app.dp.graph import Graph

SEQ = """% Different categories found in input file:

frontpage news tech local opinion on-air misc weather

% Sequences:

1 1
2 3 2 4
1 5 6 1 7
3 3 3
17 16 1 2 3 4 5 6
9
"""


def test_sessions_slots_and_graph(tmp_path):
    path = tmp_path / "msnbc990928.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("msnbc990928.seq", SEQ)
    sessions = trajectory.read_sessions(path)
    assert sessions[0] == [0, 0] and len(sessions) == 6
    counts, kept, clipped = trajectory.slot_counts(sessions, 3, 17, cap=3)
    assert counts.sum() == kept and (kept, clipped) == (1 + 3 + 3 + 1 + 3 + 1, 1 + 5)
    assert counts[0].tolist()[:4] == [1, 1, 1, 1]  # sessions 0-1: pages {0} and {1, 2, 3}
    g = trajectory.successor_graph(sessions, 17, top_k=2)
    assert [0, 4] in g.edges() and g.nodes == 17
    groups = trajectory.ball_groups(g)
    assert sorted(p for grp in groups for p in grp) == list(range(17))


def _grid_data() -> trajectory.Trajectories:
    """40 slots of random counts on the 2 x 3 grid's pages (seed 0), grouped by balls."""
    g = Graph.grid(2, 3)
    rng = np.random.default_rng(0)
    return trajectory.Trajectories(
        counts=rng.integers(0, 50, (40, 6)),
        graph=g,
        page_groups=trajectory.ball_groups(g),
        process_var=10.0,
        clipped_share=0.0,
        slot_users=300,
    )


def test_every_mechanism_runs_through_the_registry():
    data = _grid_data()
    rows = trajectory.sweep(data, "n", [1, 2], {"eps": 1.0, "w": 10, "n": 1}, cap=2, seeds=1)
    assert len(rows) == 2 * len(trajectory.MECHANISMS)
    assert all(r["mae"] > 0 and r["mre"] > 0 for r in rows)


def test_n_sweep_carries_the_publish_every_timestamp_contrast():
    """Fig. 10's rows hold wn_uniform beside the four; its error does not move with n (its
    spending is eps / w per page whatever the window), BD's neither."""
    from app.bench.wn import figs as trajectory_figs

    data = _grid_data()
    assert trajectory_figs.figure_mechanisms("eps") == (*trajectory.MECHANISMS, "rescuedp_g")
    rows = trajectory.sweep(
        data,
        "n",
        [1, 3],
        {"eps": 1.0, "w": 10, "n": 1},
        2,
        1,
        trajectory_figs.figure_mechanisms("n"),
    )
    uniform = [r["mae"] for r in rows if r["mechanism"] == "wn_uniform"]
    assert len(uniform) == 2 and uniform[0] == uniform[1] > 0
