"""LDP-IDS experiments: MRE and communication (CFPU) of the local mechanisms on synthetic data.

Reproduces the comparisons of Ren et al., SIGMOD 2022, §7 on the binary synthetic streams
(LNS, Sin, Log; ``d = 2``; ``N = 200,000``, ``T = 800`` by default): mean MRE over seeds per
(stream, mechanism, eps, w), and CFPU (spec ``seed-004`` §6, A25: the mean over full windows of
reports per user per slot). Every row records its seed(s) and parameters. Mechanisms are built
through the registry by :func:`app.bench.engine.simulate.run_local`.

``dpstream bench ldp-ids`` runs its presets (:mod:`app.bench.engine.presets`).

>>> rows = grid(["sin"], ["lpu", "lbu"], [1.0], [4], users=2_000, slots=30, seeds=[0])
>>> [(r["mechanism"], round(r["cfpu"], 3)) for r in rows]
[('lpu', 0.25), ('lbu', 1.0)]
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.engine.measures import mre
from app.bench.engine.simulate import LocalRun, run_local
from app.bench.engine.synthetic import probabilities

MECHANISMS = ("lbu", "lbd", "lba", "lsp", "lpu", "lpd", "lpa")
BUDGET_DIVISION = ("lbu", "lbd", "lba")
POPULATION_DIVISION = ("lsp", "lpu", "lpd", "lpa")
MRE_FLOOR = 1e-3
"""Relative-error floor on the frequency scale (spec §7.5, ``delta_s``)."""


def stream_values(
    name: str, slots: int, users: int, rng: np.random.Generator
) -> npt.NDArray[np.int8]:
    """Binary values ``(T, N)`` of a synthetic stream, built one slot at a time (low memory).

    Exactly ``round(p_t N)`` users, chosen uniformly, hold 1 at slot ``t`` (spec A22).
    """
    p = probabilities(name, slots, rng)
    out = np.zeros((slots, users), dtype=np.int8)
    for t in range(slots):
        ones = int(round(float(p[t]) * users))
        out[t, rng.choice(users, ones, replace=False)] = 1
    return out


def frequencies(values: npt.NDArray[np.integer[Any]], d: int) -> npt.NDArray[np.float64]:
    """True histograms ``(T, d)`` as frequencies."""
    n = values.shape[1]
    return np.stack([np.bincount(row, minlength=d)[:d] / n for row in values])


def cfpu(run: LocalRun, users: int, slots: int, w: int) -> float:
    """Mean over full windows of reports per user per slot (spec A25)."""
    per_slot = run.reports_per_slot(slots).astype(np.float64)
    sums = np.convolve(per_slot, np.ones(w), mode="valid")
    return float(sums.mean() / (users * w))


def point_rows(
    stream: str,
    values: npt.NDArray[np.integer[Any]],
    d: int,
    mechanisms: Sequence[str],
    eps: float,
    w: int,
    seed: int,
) -> list[dict[str, Any]]:
    """One row per mechanism at ``(eps, w)`` on one seed's ``values`` ``(T, N)``."""
    slots, users = values.shape
    truth = frequencies(values, d)
    rows = []
    for name in mechanisms:
        params = {"eps": eps, "w": w, "users": users}
        rng = np.random.default_rng([seed, 1])
        began = time.perf_counter()
        run = run_local(values, d, name, params, rng, keep="counts")
        seconds = time.perf_counter() - began
        released = run.histograms()
        rows.append(
            {
                "stream": stream,
                "mechanism": name,
                "eps": eps,
                "w": w,
                "users": users,
                "slots": slots,
                "d": d,
                "seed": seed,
                "mre": mre(released, truth, MRE_FLOOR),
                "mae": float(np.abs(released - truth).mean()),
                "cfpu": cfpu(run, users, slots, w),
                "publications": sum(r.fresh for r in run.releases),
                "run_s": round(seconds, 3),
            }
        )
    return rows


def dataset_values(
    dataset: str, seed: int, options: dict[str, Any]
) -> tuple[npt.NDArray[np.integer[Any]], int]:
    """Values ``(T, N)`` and ``d`` of ``dataset`` for ``seed``.

    Synthetic streams (``lns``, ``sin``, ``log``) take ``users`` and ``slots`` and are redrawn
    per seed by :func:`stream_values`; ``tdrive`` takes the keyword options of
    :func:`app.bench.engine.datasets.load_tdrive` (e.g. ``regions=5, slot="10min"``) and is the same
    data on every seed.
    """
    if dataset == "tdrive":
        from app.bench.engine.datasets import load_tdrive

        ds = load_tdrive(**options)
        values = ds.values[:, (ds.values >= 0).all(axis=0)]  # users with a value in every slot
        return values.astype(np.int64), ds.d
    users, slots = options.get("users", 200_000), options.get("slots", 800)
    return stream_values(dataset, slots, users, np.random.default_rng([seed, 0])), 2


def _point_task(
    dataset: str,
    mechanisms: Sequence[str],
    eps: float,
    w: int,
    seed: int,
    options: dict[str, Any],
) -> list[dict[str, Any]]:
    values, d = dataset_values(dataset, seed, options)
    rows = point_rows(dataset, values, d, mechanisms, eps, w, seed)
    return [{"dataset": dataset, **r} for r in rows]


def run_points(
    dataset: str,
    mechanisms: Sequence[str],
    points: Sequence[tuple[float, int]],
    seeds: Sequence[int],
    options: dict[str, Any],
    jobs: int | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Every mechanism at every ``(eps, w)`` point on every seed, on ``jobs`` processes.

    One task per (seed, point): each worker rebuilds the seed's data (cheap next to seven
    mechanism runs) so no large array crosses processes. Rows come back in task order.
    """
    import os
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm

    jobs = jobs or os.cpu_count() or 1
    todo = [(dataset, tuple(mechanisms), e, w, s, dict(options)) for s in seeds for e, w in points]
    bar = tqdm(
        total=len(todo) * len(mechanisms), desc=f"bench {dataset}", unit="run", disable=not progress
    )
    rows: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(_point_task, *t) for t in todo]:
            rows += f.result()
            bar.update(len(mechanisms))
    bar.close()
    return rows


def grid(
    streams: Sequence[str],
    mechanisms: Sequence[str],
    eps_grid: Sequence[float],
    w_grid: Sequence[int],
    users: int,
    slots: int,
    seeds: Sequence[int],
) -> list[dict[str, Any]]:
    """One row per (stream, mechanism, eps, w, seed): MRE, CFPU and publications."""
    rows = []
    for seed in seeds:
        for stream in streams:
            values = stream_values(stream, slots, users, np.random.default_rng([seed, 0]))
            for eps in eps_grid:
                for w in w_grid:
                    rows += point_rows(stream, values, 2, mechanisms, eps, w, seed)
    return rows


def summary(
    rows: list[dict[str, Any]], key: str = "mre"
) -> dict[tuple[str, float, int, str], float]:
    """Mean of ``key`` over seeds, per (stream, eps, w, mechanism)."""
    groups: dict[tuple[str, float, int, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["stream"], r["eps"], r["w"], r["mechanism"]), []).append(r[key])
    return {k: float(np.mean(v)) for k, v in groups.items()}
