"""Offline (w,n)-DP benchmark on msnbc page-category trajectories (seed 003, claims T1-T4, T6).

The paper's WorldCup98 logs are not available; msnbc.com's 989,818 sessions over 17 page
categories stand in (``<data root>/msnbc/msnbc990928.zip``, read in place, never copied).
Resolution of what the data lacks (it has no timestamps):

* **slots**: the first ``calibration`` share of the sessions (file order) is held out as public
  calibration data; the rest is cut into ``T`` consecutive slots of equal session counts;
* **trajectories**: a session visits the *distinct* categories of its clicks, clipped to its
  first ``l`` distinct ones (spec E4); the clipped share is reported;
* **graph**: categories are linked to their ``top_k`` most frequent successors in the held-out
  sessions (symmetrised), the analogue of the paper's top-2 rule (spec A1) on public data;
* **page groups** (STBD): a greedy cover of the graph by 1-hop balls of high-degree centres
  (no Louvain in the core; spec A3);
* **Kalman Q** (STR, RescueDP): the mean per-category variance of first differences of the
  held-out sessions' per-slot counts (spec A5), never of the released series.

Errors follow Eq. 19: MAE, and MRE with the floor ``0.1%`` of the slot's true total.
``dpstream bench wn`` runs it (:mod:`app.bench.wn.figs`); mechanisms come from the registry.
"""

from __future__ import annotations

import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from app.bench.engine.datasets.base import data_root
from app.dp.graph import Graph
from app.dp.interfaces import as_slotted
from app.dp.registry import create
from app.dp.types import Group

MECHANISMS = ("bd", "stbd", "str", "rescuedp")
CONTRASTS: dict[str, tuple[str, ...]] = {
    "eps": ("rescuedp_g",),
    "w": ("rescuedp_g",),
    "n": ("rescuedp_g", "wn_uniform"),
}
"""Extra mechanisms per sweep axis: RescueDP with its dynamic grouping (spec A7's variant)
beside the paper's RescueDP on every sweep, and the n sweep's publish-every-timestamp
contrast (Uniform on the (w,n) ledger, spec T4; Fig. 10's text)."""


@dataclass(frozen=True)
class Trajectories:
    """Per-slot counts of distinct visitors per page, the public graph and calibration figures."""

    counts: npt.NDArray[np.int64]  # (T, d)
    graph: Graph
    page_groups: list[list[int]]
    process_var: float
    clipped_share: float
    slot_users: int
    """Sessions assigned to a slot (at most): the public population BD's OBS takes."""


def read_sessions(path: Path | None = None) -> list[list[int]]:
    """msnbc sessions as lists of 0-based category codes, in file order."""
    source = path or data_root() / "msnbc" / "msnbc990928.zip"
    with zipfile.ZipFile(source) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".seq") and "MACOSX" not in n)
        text = zf.read(name).decode("ascii")
    body = text.partition("% Sequences:")[2]
    return [[int(x) - 1 for x in line.split()] for line in body.splitlines() if line.strip()]


def slot_counts(
    sessions: Sequence[Sequence[int]], slots: int, d: int, cap: int
) -> tuple[npt.NDArray[np.int64], int, int]:
    """(slots, d) distinct visitors per page, each session clipped to ``cap`` distinct pages;
    also the number of (session, page) visits kept and clipped."""
    counts = np.zeros((slots, d), dtype=np.int64)
    kept = clipped = 0
    n = len(sessions)
    for i, s in enumerate(sessions):
        pages = list(dict.fromkeys(s))  # distinct, in visiting order
        kept += min(len(pages), cap)
        clipped += max(0, len(pages) - cap)
        counts[i * slots // n, pages[:cap]] += 1
    return counts, kept, clipped


def successor_graph(sessions: Sequence[Sequence[int]], d: int, top_k: int) -> Graph:
    """Each page linked to its ``top_k`` most frequent successors (symmetrised)."""
    trans = np.zeros((d, d), dtype=np.int64)
    for s in sessions:
        a = np.asarray(s)
        if a.size > 1:
            np.add.at(trans, (a[:-1], a[1:]), 1)
    trans = trans + trans.T
    np.fill_diagonal(trans, -1)
    top = np.argsort(-trans, axis=1, kind="stable")[:, :top_k]
    return Graph(d, [[u, int(v)] for u in range(d) for v in top[u] if trans[u, v] > 0])


def ball_groups(graph: Graph) -> list[list[int]]:
    """Greedy cover by 1-hop balls: the highest-degree uncovered page takes its uncovered ball."""
    left = np.ones(graph.nodes, dtype=bool)
    degree = graph.degree()
    groups = []
    while left.any():
        c = int(np.argmax(np.where(left, degree, -1)))
        ball = np.append(graph.indices[graph.indptr[c] : graph.indptr[c + 1]], c)
        ball = ball[left[ball]]
        left[ball] = False
        groups.append(sorted(int(x) for x in ball))
    return groups


def load(slots: int = 768, cap: int = 5, calibration: float = 0.1, top_k: int = 2) -> Trajectories:
    """The msnbc stand-in for the paper's release period; see the module docstring."""
    return from_sessions(read_sessions(), 17, slots, cap, calibration, top_k)


def from_sessions(
    sessions: Sequence[Sequence[int]],
    d: int,
    slots: int,
    cap: int,
    calibration: float = 0.1,
    top_k: int = 2,
) -> Trajectories:
    """Sessions over ``d`` pages as a release period (the module docstring's resolution): the
    first ``calibration`` share public, the rest spread evenly over ``slots``."""
    held = int(len(sessions) * calibration)
    public, released = sessions[:held], sessions[held:]
    counts, kept, clipped = slot_counts(released, slots, d, cap)
    calib, _, _ = slot_counts(public, max(2, slots * held // max(len(released), 1)), d, cap)
    graph = successor_graph(public, d, top_k)
    q = float(np.diff(calib, axis=0).var(axis=0).mean())
    share = clipped / max(kept + clipped, 1)
    slot_users = -(-len(released) // slots)  # sessions are spread evenly over the slots
    return Trajectories(counts, graph, ball_groups(graph), q, share, slot_users)


def errors(truth: npt.NDArray[np.int64], out: npt.NDArray[np.float64]) -> tuple[float, float]:
    """MAE and MRE of Eq. 19, the MRE floor being 0.1% of each slot's true total."""
    err = np.abs(out - truth)
    floor = np.maximum(0.001 * truth.sum(axis=1, keepdims=True), 1e-12)
    return float(err.mean()), float((err / np.maximum(floor, truth)).mean())


def run_one(
    name: str, data: Trajectories, eps: float, w: int, n: int, cap: int, seed: int
) -> tuple[float, float]:
    """Replay the whole stream through one registered mechanism; (MAE, MRE)."""
    d = data.graph.nodes
    params: dict[str, object] = {"d": d, "groups": [Group(w, eps)], "sensitivity": cap}
    if name in ("stbd", "str", "wn_uniform"):
        params.update(n=n, edges=data.graph.edges())
    if name == "stbd":
        params["page_groups"] = data.page_groups
    if name in ("str", "rescuedp", "rescuedp_g"):
        params["process_var"] = data.process_var
    m = as_slotted(create(name, **params))
    rng = np.random.default_rng(seed)
    users = [data.slot_users]
    out = np.array([m.step(c[None, :], rng, users).histogram for c in data.counts])
    return errors(data.counts, out)


def sweep(
    data: Trajectories,
    axis: str,
    values: Sequence[float],
    base: dict[str, float],
    cap: int,
    seeds: int,
    mechanisms: Sequence[str] = MECHANISMS,
) -> list[dict[str, float | str]]:
    """Mean MAE/MRE over seeds for every mechanism and value of ``axis`` (eps, w or n)."""
    rows: list[dict[str, float | str]] = []
    for v in values:
        p = {**base, axis: v}
        for name in mechanisms:
            res = np.array(
                [
                    run_one(name, data, p["eps"], int(p["w"]), int(p["n"]), cap, s)
                    for s in range(seeds)
                ]
            )
            rows.append(
                {
                    "axis": axis,
                    "value": v,
                    "mechanism": name,
                    "mae": float(res[:, 0].mean()),
                    "mre": float(res[:, 1].mean()),
                    "seeds": seeds,
                }
            )
    return rows
