"""Generated (w,n) trajectory streams: what ``dpstream bench wn`` runs on a clone without data.

The (w,n) benchmark needs users who move over a graph, a few distinct nodes a slot. Without the
public sets (docs/datasets.md) two seeded generators stand in; each keeps what the mechanisms
are sensitive to (a skewed popularity over the nodes, moves along the graph, a clipped number
of distinct nodes per user and slot, counts that drift between slots), not the real values.

* ``gen-clicks`` (for msnbc, 17 page categories): a hidden category graph links each category
  to :data:`LINKS` others picked in proportion to a Zipf popularity (exponent
  :data:`ZIPF`: a few categories take most clicks, as msnbc's front page and news). A session
  starts on a category drawn by popularity, has ``1 + Geometric`` clicks (mean
  :data:`MEAN_CLICKS`, at most :data:`MAX_CLICKS`; msnbc's mean is 4.7) and each click stays on
  its category with probability :data:`STAY` or follows a link, by popularity. The sessions
  then go through msnbc's own resolution (:func:`app.bench.wn.trajectory.from_sessions`): the
  first 10% are public and give the graph (top-2 successors) and Kalman ``Q``, the rest fill
  the slots evenly (:data:`SESSIONS_PER_SLOT` each).
* ``gen-taxis`` (for T-Drive on its 10 x 10 grid, 8 neighbours, 10-minute slots): :data:`TAXIS`
  taxis over one week (1,008 slots) each report :data:`FIXES` fixes a slot, a lazy random walk
  on the grid (stay with probability :data:`STAY`, else a neighbour in proportion to a
  Gaussian attraction to the centre cell: downtown is busy). A taxi is on duty in a slot with
  a probability that follows the day (low at 4 a.m., high in the afternoon); off duty it
  reports nothing. Its trajectory in a slot is its distinct cells in time order, clipped to
  the first ``cap``; the first 10% of the taxis are public and give ``Q``, as T-Drive's.

>>> data = GENERATED["gen-taxis"](5)
>>> data.counts.shape, data.graph.nodes, data.slot_users
((1008, 100), 100, 540)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from app.bench.wn.trajectory import Trajectories, ball_groups, from_sessions
from app.dp.graph import Graph

CATEGORIES = 17
ZIPF = 1.1
LINKS = 3
MEAN_CLICKS = 4.7
MAX_CLICKS = 40
STAY = 0.5
SESSIONS_PER_SLOT = 200
CLICK_SLOTS = 768
TAXIS = 600
GRID = 10
FIXES = 6
TAXI_SLOTS = 7 * 144
SEED = 0
"""The generators' fixed parameters and seed (module docstring)."""


def _sample(
    cum: npt.NDArray[np.float64], rows: npt.NDArray[np.int64], u: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Column drawn from each ``cum[rows]`` (row-wise cumulative probabilities) at ``u``."""
    drawn: npt.NDArray[np.int64] = (cum[rows] < u[:, None]).sum(axis=1).astype(np.int64)
    return drawn


def click_sessions(sessions: int, seed: int = SEED) -> list[list[int]]:
    """``sessions`` generated click sessions over :data:`CATEGORIES` categories (docstring)."""
    rng = np.random.default_rng(seed)
    d = CATEGORIES
    pop = 1.0 / np.arange(1, d + 1) ** ZIPF
    pop /= pop.sum()
    adj = np.zeros((d, d), dtype=bool)
    for c in range(d):
        others = np.delete(np.arange(d), c)
        picks = rng.choice(others, size=LINKS, replace=False, p=pop[others] / pop[others].sum())
        adj[c, picks] = adj[picks, c] = True
    move = adj * pop
    trans = (1 - STAY) * move / move.sum(axis=1, keepdims=True) + STAY * np.eye(d)
    cum = np.cumsum(trans, axis=1)
    lengths = np.minimum(rng.geometric(1 / MEAN_CLICKS, sessions), MAX_CLICKS)
    walk = np.empty((sessions, MAX_CLICKS), dtype=np.int64)
    walk[:, 0] = _sample(
        np.cumsum(pop)[None, :], np.zeros(sessions, np.int64), rng.random(sessions)
    )
    for k in range(1, MAX_CLICKS):
        walk[:, k] = _sample(cum, walk[:, k - 1], rng.random(sessions))
    return [row[:n].tolist() for row, n in zip(walk, lengths, strict=True)]


def gen_clicks(cap: int, slots: int = CLICK_SLOTS, seed: int = SEED) -> Trajectories:
    """The msnbc stand-in: generated sessions through msnbc's resolution (docstring)."""
    sessions = click_sessions(int(slots * SESSIONS_PER_SLOT / 0.9), seed)
    return from_sessions(sessions, CATEGORIES, slots, cap)


def gen_taxis(cap: int, slots: int = TAXI_SLOTS, seed: int = SEED) -> Trajectories:
    """The T-Drive stand-in: lazy walks on the grid, on duty by time of day (docstring)."""
    rng = np.random.default_rng(seed)
    graph = Graph.grid(GRID, GRID, 8)
    d = graph.nodes
    r, c = np.divmod(np.arange(d), GRID)
    centre = (GRID - 1) / 2
    pull = np.exp(-((r - centre) ** 2 + (c - centre) ** 2) / (2 * (GRID / 4) ** 2))
    trans = np.zeros((d, d))
    for v in range(d):
        near = graph.indices[graph.indptr[v] : graph.indptr[v + 1]]
        trans[v, near] = (1 - STAY) * pull[near] / pull[near].sum()
        trans[v, v] = STAY
    cum = np.cumsum(trans, axis=1)
    where = _sample(
        np.cumsum(pull / pull.sum())[None, :], np.zeros(TAXIS, np.int64), rng.random(TAXIS)
    )
    cells = np.empty((slots, FIXES, TAXIS), dtype=np.int64)
    for t in range(slots):
        for f in range(FIXES):
            where = _sample(cum, where, rng.random(TAXIS))
            cells[t, f] = where
    hour = (np.arange(slots) % 144) / 6
    duty = 0.55 + 0.35 * np.cos(2 * np.pi * (hour - 15) / 24)
    on = rng.random((slots, TAXIS)) < duty[:, None]
    first = np.ones(cells.shape, dtype=bool)  # a cell's first fix in its (slot, taxi)
    for f in range(1, FIXES):
        first[:, f] = (cells[:, :f] != cells[:, f : f + 1]).all(axis=1)
    rank = np.cumsum(first, axis=1)
    kept = first & (rank <= cap) & on[:, None, :]
    clipped = first & (rank > cap) & on[:, None, :]
    public = np.arange(TAXIS) < TAXIS // 10

    def counts(mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
        t = np.broadcast_to(np.arange(slots)[:, None, None], cells.shape)
        hit = kept & mask[None, None, :]
        flat = np.bincount(t[hit] * d + cells[hit], minlength=slots * d)
        return flat.reshape(slots, d).astype(np.int64)

    calib = counts(public)
    released = ~public
    n_kept = int(kept[:, :, released].sum())
    n_clipped = int(clipped[:, :, released].sum())
    return Trajectories(
        counts(released),
        graph,
        ball_groups(graph),
        float(np.diff(calib, axis=0).var(axis=0).mean()),
        n_clipped / max(n_kept + n_clipped, 1),
        int(released.sum()),
    )


GENERATED: dict[str, Callable[[int], Trajectories]] = {
    "gen-clicks": gen_clicks,
    "gen-taxis": gen_taxis,
}
"""Generated data set name -> loader taking ``cap`` (the paper's ``l``)."""

STAND_INS = {"msnbc": "gen-clicks", "tdrive": "gen-taxis", "diginetica": "gen-clicks"}
"""The generated set that runs in place of each missing public set."""

__all__ = ["GENERATED", "STAND_INS", "click_sessions", "gen_clicks", "gen_taxis"]
