"""The (w,n) paper's Table 1 on the stand-in data: how far a user's values spread over the graph.

Definition 5 of Liu et al. (spec ``seed-003-trajectory.md`` §1.2, §A2): the *spatial range* of a
set of pages ``P`` is the graph 1-centre radius ``min_c max_{m in P} d(c, m)`` (the centre need
not be in ``P``); a trajectory of range ``n`` fits an (n+1)-range window. Table 1 takes, for each
sampled user and each ``w``, the distinct pages the user visited in the ``w`` slots starting at
its first slot (spec A2.3 resolution) and reports the cumulative share of users with range
``<= n``. A set spanning two connected components has no centre: its range is *unreachable*
(reported apart; the paper's graph is connected, Diginetica's co-visit graph is not).

The users' slots follow the stand-in loaders (``app.bench.wn.trajectory``,
``app.bench.wn.data``), each user clipped to its first ``l`` distinct pages per slot:

* **T-Drive**: a taxi, 10-minute slots, the cells it reported from on the 10 x 10 8-neighbour grid;
* **msnbc**: a session, one slot per click (the resolution of
  ``app.bench.engine.datasets.msnbc``; the
  Figs. 8-10 bench puts a whole session in one slot instead), the top-2 successor graph of the
  held-out sessions; ``users`` sessions sampled from the released ones;
* **Diginetica**: a session (one day, so one slot whatever ``w``), its products on the
  calibration period's top-2 co-visit graph.

``dpstream bench wn --figure table1 [--data tdrive,msnbc,diginetica]`` prints one table per
dataset.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import date

import numpy as np
import numpy.typing as npt

from app.bench.wn.data import covisit_graph, read_diginetica, tdrive_cells
from app.bench.wn.trajectory import read_sessions, successor_graph
from app.dp.graph import Graph

WS = (40, 80, 120, 160, 200)
"""Table 1's window lengths."""
NS = tuple(range(9))
"""Table 1's ranges n = 0..8."""
UNREACHABLE = 255
"""Hop distance (and range) standing for "another connected component"."""

Visits = list[tuple[int, list[int]]]
"""One user's slots: ``(slot, distinct pages in visiting order)``, slots ascending."""


class Ranges:
    """Spatial ranges over one public graph; hop distances computed once per page (uint8)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self._rows: dict[int, npt.NDArray[np.uint8]] = {}

    def _row(self, page: int) -> npt.NDArray[np.uint8]:
        row = self._rows.get(page)
        if row is None:
            d = self.graph.hop_distances(page)
            row = np.where((d < 0) | (d >= UNREACHABLE), UNREACHABLE, d).astype(np.uint8)
            self._rows[page] = row
        return row

    def spatial_range(self, pages: Sequence[int]) -> int:
        """``min_c max_{m in pages} d(c, m)``; :data:`UNREACHABLE` across components."""
        if not pages:
            raise ValueError("a trajectory visits at least one page")
        far = np.max([self._row(int(m)) for m in pages], axis=0)
        return int(far.min())


def window_pages(visits: Visits, w: int) -> list[int]:
    """The distinct pages of the ``w`` slots starting at the user's first slot."""
    first = visits[0][0]
    return sorted({m for t, pages in visits if t < first + w for m in pages})


def range_table(
    ranges: Ranges, users: Sequence[Visits], ws: Sequence[int] = WS
) -> dict[int, npt.NDArray[np.float64]]:
    """Per ``w``: the cumulative % of users with range ``<= n`` for ``n`` in :data:`NS`,
    then the % whose pages span components (the last entry)."""
    out = {}
    for w in ws:
        r = np.array([ranges.spatial_range(window_pages(v, w)) for v in users])
        cum = [100.0 * float(np.mean(r <= n)) for n in NS]
        out[w] = np.array([*cum, 100.0 * float(np.mean(r == UNREACHABLE))])
    return out


def markdown(table: dict[int, npt.NDArray[np.float64]]) -> str:
    """Table 1's layout: one row per ``n``, one column per ``w``, and an unreachable row."""
    ws = list(table)
    lines = ["| n \\ w | " + " | ".join(str(w) for w in ws) + " |", "|---" * (len(ws) + 1) + "|"]
    for i, n in enumerate([*NS, "other component"]):
        lines.append(f"| {n} | " + " | ".join(f"{table[w][i]:.2f}" for w in ws) + " |")
    return "\n".join(lines)


def _clip(pages: Sequence[int], cap: int) -> list[int]:
    return list(dict.fromkeys(pages))[:cap]


def tdrive_users(cap: int = 5, calibration: float = 0.1) -> tuple[Graph, list[Visits]]:
    """T-Drive taxis (the released ones) as visits over the 10 x 10 8-neighbour grid."""
    taxi, slot, cell = tdrive_cells(10, 10, 10.0)
    taxis = np.unique(taxi)
    released = set(taxis[int(len(taxis) * calibration) :].tolist())
    by_user: dict[int, dict[int, list[int]]] = {}
    for u, t, c in zip(taxi.tolist(), slot.tolist(), cell.tolist(), strict=True):
        if u in released:
            by_user.setdefault(u, {}).setdefault(t, []).append(c)
    users = [[(t, _clip(p, cap)) for t, p in sorted(s.items())] for s in by_user.values()]
    return Graph.grid(10, 10, 8), users


def msnbc_users(
    users: int = 50_000, calibration: float = 0.1, seed: int = 0
) -> tuple[Graph, list[Visits]]:
    """``users`` released msnbc sessions (sampled, fixed seed), one slot per click."""
    sessions = read_sessions()
    held = int(len(sessions) * calibration)
    graph = successor_graph(sessions[:held], 17, 2)
    released = sessions[held:]
    pick = np.random.default_rng(seed).choice(len(released), min(users, len(released)), False)
    return graph, [[(k, [c]) for k, c in enumerate(released[i])] for i in sorted(pick)]


def diginetica_users(cap: int = 5, calibration: float = 0.3) -> tuple[Graph, list[Visits]]:
    """Released Diginetica sessions (one slot each) over the calibration co-visit graph."""
    views = sorted(read_diginetica(), key=lambda v: (v[0], v[2]))
    index = {item: i for i, item in enumerate(sorted({v[3] for v in views}))}
    first: date = min(v[1] for v in views)
    cut = int(((max(v[1] for v in views) - first).days + 1) * calibration)
    sessions: dict[int, tuple[int, list[int]]] = {}
    for sid, when, _, item in views:
        sessions.setdefault(sid, ((when - first).days, []))[1].append(index[item])
    public = [p for day, p in sessions.values() if day < cut]
    graph = covisit_graph(public, len(index), 2)
    return graph, [[(day, _clip(p, cap))] for day, p in sessions.values() if day >= cut]


LOADERS: dict[str, Callable[[], tuple[Graph, list[Visits]]]] = {
    "tdrive": tdrive_users,
    "msnbc": msnbc_users,
    "diginetica": diginetica_users,
}


def print_tables(names: Sequence[str]) -> int:
    """Print Table 1 of each data set of ``names`` (``dpstream bench wn --figure table1``)."""
    for name in names:
        started = time.perf_counter()
        graph, users = LOADERS[name]()
        table = range_table(Ranges(graph), users)
        print(
            f"\n{name}: {len(users)} users, graph {graph.nodes} nodes / {graph.edge_count} "
            f"edges ({time.perf_counter() - started:.0f} s)"
        )
        print(markdown(table))
    return 0
