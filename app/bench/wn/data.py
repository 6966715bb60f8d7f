"""T-Drive and Diginetica as (w,n) trajectory streams (seed 003 stand-ins besides msnbc).

Both are read in place under the data root (``../shared/data/raw``), never copied, and turned
into :class:`app.bench.wn.trajectory.Trajectories`: per-slot counts of distinct visitors per node,
each user clipped to its first ``cap`` distinct nodes in a slot (the papers' ``l``), a public
graph, page groups and a Kalman ``Q`` from public calibration data.

* **T-Drive** (599 taxis, 2-8 Feb 2008): GPS fixes in the box lon [116, 116.8] x lat
  [39.5, 40.3] fall in a ``rows x cols`` grid; a taxi's trajectory in a slot is the distinct
  cells it reported from, in time order. The graph is the grid (4 or 8 neighbours): public by
  construction. The first ``calibration`` share of the taxis (by id) is held out for ``Q``.
* **Diginetica** (CIKM Cup 2016 sample: 2,986 sessions, 7,139 product pages): one slot per
  ``slot_days`` days; a session is a user and visits its distinct products. The earliest
  ``calibration`` share of the days is public: it gives the co-visit graph (each product linked
  to its ``top_k`` most frequent co-visited products within a session, symmetrised, as the
  paper's top-2 rule) and ``Q``; the rest is released. Products never seen in the calibration
  period are isolated nodes (place level).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.bench.engine.datasets.base import data_root
from app.bench.wn.trajectory import Trajectories, ball_groups, slot_counts
from app.dp.graph import Graph

BOX = (116.0, 116.8, 39.5, 40.3)
"""T-Drive's Beijing box: lon min, lon max, lat min, lat max (SOURCE.md: 91% of the fixes)."""


def _process_var(counts: npt.NDArray[np.int64]) -> float:
    """Kalman ``Q``: mean per-node variance of first differences of public per-slot counts."""
    return float(np.diff(counts, axis=0).var(axis=0).mean()) if len(counts) > 1 else 1.0


def read_tdrive(folder: Path | None = None) -> list[tuple[int, float, float, float]]:
    """T-Drive fixes ``(taxi, unix time, lon, lat)``, duplicates removed, sorted by taxi, time."""
    root = folder or data_root() / "tdrive_sample600" / "taxi_log_2008_by_id"
    rows = set()
    for path in root.glob("*.txt"):
        for line in path.read_text().splitlines():
            parts = line.split(",")
            if len(parts) == 4:
                stamp = datetime.strptime(parts[1], "%Y-%m-%d %H:%M:%S").timestamp()  # noqa: DTZ007
                rows.add((int(parts[0]), stamp, float(parts[2]), float(parts[3])))
    return sorted(rows)


def tdrive_cells(
    rows: int, cols: int, slot_min: float
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """T-Drive fixes inside :data:`BOX` as ``(taxi, slot, cell)`` arrays, sorted by taxi, time;
    cell ``row * cols + col`` of the ``rows x cols`` grid, slot counted from the first fix."""
    fixes = np.array(read_tdrive(), dtype=np.float64)
    lon0, lon1, lat0, lat1 = BOX
    inside = (
        (fixes[:, 2] >= lon0) & (fixes[:, 2] < lon1) & (fixes[:, 3] >= lat0) & (fixes[:, 3] < lat1)
    )
    fixes = fixes[inside]
    col = ((fixes[:, 2] - lon0) / (lon1 - lon0) * cols).astype(np.int64)
    row = ((fixes[:, 3] - lat0) / (lat1 - lat0) * rows).astype(np.int64)
    slot = ((fixes[:, 1] - fixes[:, 1].min()) // (slot_min * 60)).astype(np.int64)
    return fixes[:, 0].astype(np.int64), slot, row * cols + col


def tdrive(
    rows: int = 10,
    cols: int = 10,
    neighbours: int = 8,
    slot_min: float = 10.0,
    cap: int = 5,
    calibration: float = 0.1,
    slots: int | None = None,
) -> Trajectories:
    """T-Drive over a ``rows x cols`` grid in ``slot_min``-minute slots (first ``slots`` only)."""
    taxi, slot, cell = tdrive_cells(rows, cols, slot_min)
    taxis = np.unique(taxi)
    public = np.isin(taxi, taxis[: int(len(taxis) * calibration)])
    total = int(slot.max()) + 1 if slots is None else slots
    d = rows * cols

    def counts(mask: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], int, int]:
        out = np.zeros((total, d), dtype=np.int64)
        kept = clipped = 0
        seen: dict[tuple[int, int], list[int]] = {}
        for t, u, c in zip(slot[mask], taxi[mask], cell[mask], strict=True):
            if t >= total:
                continue
            held = seen.setdefault((int(t), int(u)), [])
            if c in held:
                continue
            if len(held) >= cap:
                clipped += 1
                continue
            held.append(int(c))
            out[t, c] += 1
            kept += 1
        return out, kept, clipped

    released, kept, clipped = counts(~public)
    calib, _, _ = counts(public)
    graph = Graph.grid(rows, cols, neighbours)
    users = len(taxis) - int(len(taxis) * calibration)
    return Trajectories(
        released,
        graph,
        ball_groups(graph),
        _process_var(calib),
        clipped / max(kept + clipped, 1),
        users,
    )


def read_diginetica(path: Path | None = None) -> list[tuple[int, date, int, int]]:
    """Diginetica item views ``(session, date, time in session (ms), item id)``, file order."""
    source = path or data_root() / "diginetica_sample" / "sample_train-item-views.csv"
    with source.open(newline="") as f:
        reader = csv.DictReader(f, delimiter=";")
        return [
            (
                int(r["session_id"]),
                date.fromisoformat(r["eventdate"]),
                int(r["timeframe"]),
                int(r["item_id"]),
            )
            for r in reader
        ]


def covisit_graph(sessions: Sequence[Sequence[int]], d: int, top_k: int) -> Graph:
    """Each page linked to its ``top_k`` most frequent co-visited pages (symmetrised); sparse."""
    pairs: dict[tuple[int, int], int] = {}
    for s in sessions:
        pages = sorted(set(s))
        for i, a in enumerate(pages):
            for b in pages[i + 1 :]:
                pairs[a, b] = pairs.get((a, b), 0) + 1
    by_page: dict[int, list[tuple[int, int]]] = {}
    for (a, b), k in pairs.items():
        by_page.setdefault(a, []).append((-k, b))
        by_page.setdefault(b, []).append((-k, a))
    edges = [(a, b) for a, near in by_page.items() for _, b in sorted(near)[:top_k]]
    return Graph(d, edges)


def diginetica(
    slot_days: int = 1, cap: int = 5, calibration: float = 0.3, top_k: int = 2
) -> Trajectories:
    """Diginetica product-page trajectories over the calibration period's co-visit graph."""
    views = sorted(read_diginetica(), key=lambda v: (v[0], v[2]))
    items = sorted({v[3] for v in views})
    index = {item: i for i, item in enumerate(items)}
    first = min(v[1] for v in views)
    days = (max(v[1] for v in views) - first).days + 1
    cut = int(days * calibration)
    sessions: dict[int, tuple[int, list[int]]] = {}
    for sid, when, _, item in views:
        sessions.setdefault(sid, ((when - first).days, []))[1].append(index[item])
    public = [pages for day, pages in sessions.values() if day < cut]
    released = [(day - cut, pages) for day, pages in sessions.values() if day >= cut]
    total = -(-(days - cut) // slot_days)
    d = len(items)
    ordered = sorted(released, key=lambda r: r[0])
    counts = np.zeros((total, d), dtype=np.int64)
    kept = clipped = 0
    for day, pages in ordered:
        distinct = list(dict.fromkeys(pages))
        kept += min(len(distinct), cap)
        clipped += max(0, len(distinct) - cap)
        counts[day // slot_days, distinct[:cap]] += 1
    calib, _, _ = slot_counts(public, max(2, cut // slot_days), d, cap)
    graph = covisit_graph(public, d, top_k)
    per_slot = np.bincount([day // slot_days for day, _ in ordered], minlength=total)
    return Trajectories(
        counts,
        graph,
        ball_groups(graph),
        _process_var(calib),
        clipped / max(kept + clipped, 1),
        int(per_slot.max()),
    )


__all__ = [
    "covisit_graph",
    "diginetica",
    "read_diginetica",
    "read_tdrive",
    "tdrive",
    "tdrive_cells",
]
