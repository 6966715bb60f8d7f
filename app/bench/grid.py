"""Experiment grids: mechanisms x eps x w x seeds on one dataset, as the PWSM paper runs them.

A grid loads the dataset once per seed, splits users into ten contiguous *types* (the authors'
``UserType = 10``, spec seed-000 §6.3) and aggregates per-type counts once; each sweep point
then maps types to requirement groups by a *setting*:

``types``
    Each type draws ``eps_type`` uniformly from the eps grid values ``>= eps`` and ``w_type``
    from the w grid values ``<= w``; equal pairs merge into one group (§6.3).
``two-eps``
    The ratio ``o`` of users (the first types) has ``eps = 1.0``, the rest ``eps``; all ``w``
    (§5.5, Fig. 12; spec A20).
``two-w``
    The ratio ``o`` of users has ``w = 40``, the rest ``w``; all ``eps`` (Fig. 13).
``single``
    One group ``(w, eps)``.

Non-personalized mechanisms (Uniform, Sample, BD, BA) run at ``(w, eps)`` itself, which is
conservative for every user (§5.2), on the summed counts. Every row of the results records the
dataset, setting, sweep point, mechanism, seed and the measures of :mod:`app.bench.measures`.
"""

from __future__ import annotations

import csv
import inspect
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from app.bench import measures
from app.bench.datasets import LOADERS, load
from app.bench.replay import group_counts
from app.dp.registry import create, get
from app.dp.types import Group

TYPES = 10
EPS_GRID = (0.2, 0.4, 0.6, 0.8, 1.0)
W_GRID = (40, 80, 120, 160, 200)
SETTINGS = ("types", "two-eps", "two-w", "single")
Counts = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Grid:
    """One experiment: what to run, on what, how often."""

    dataset: str
    mechanisms: tuple[str, ...]
    eps_values: tuple[float, ...] = (0.6,)
    w_values: tuple[int, ...] = (120,)
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    setting: str = "types"
    ratio: float = 0.5
    mre_floor: float = 1.0
    dataset_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise ValueError(f"setting must be one of {SETTINGS}, got {self.setting!r}")
        for name in self.mechanisms:
            if get(name).kind != "central":
                raise ValueError(f"grid runs central mechanisms; {name!r} is {get(name).kind}")
        if not 0 <= self.ratio <= 1:
            raise ValueError(f"ratio must be in [0, 1], got {self.ratio}")


@dataclass(frozen=True)
class Task:
    """One mechanism at one sweep point on one seed's data."""

    mechanism: str
    eps: float
    w: int
    seed: int
    groups: tuple[Group, ...]
    type_group: tuple[int, ...]


def assign(grid: Grid, eps: float, w: int, seed: int) -> tuple[tuple[Group, ...], tuple[int, ...]]:
    """Requirement groups and the group of each user type at a sweep point (module docstring)."""
    if grid.setting == "types":
        rng = np.random.default_rng([seed, int(eps * 1000), w])
        eps_choices = [e for e in EPS_GRID if e >= eps] or [eps]
        w_choices = [x for x in W_GRID if x <= w] or [w]
        per_type = [
            Group(int(rng.choice(w_choices)), float(rng.choice(eps_choices))) for _ in range(TYPES)
        ]
    else:
        special = round(grid.ratio * TYPES)
        high = {"two-eps": Group(w, 1.0), "two-w": Group(40, eps), "single": Group(w, eps)}
        per_type = [high[grid.setting] if k < special else Group(w, eps) for k in range(TYPES)]
    groups = tuple(dict.fromkeys(per_type))
    return groups, tuple(groups.index(g) for g in per_type)


def run_task(task: Task, type_counts: Counts, mre_floor: float) -> dict[str, Any]:
    """Replay the stream through one mechanism and measure it against the true histograms."""
    cls = get(task.mechanism)
    personalized = bool(getattr(cls, "personalized", True))
    m_groups = len(task.groups) if personalized else 1
    counts = np.zeros((type_counts.shape[0], m_groups, type_counts.shape[2]), dtype=np.int64)
    for k, g in enumerate(task.type_group):
        counts[:, g if personalized else 0] += type_counts[:, k]
    groups = list(task.groups) if personalized else [Group(task.w, task.eps)]
    mech = create(task.mechanism, d=type_counts.shape[2], groups=groups)
    rng = np.random.default_rng([task.seed, 7919])
    start = time.perf_counter()
    releases = [mech.step(c, rng) for c in counts]
    seconds = time.perf_counter() - start
    r = np.array([x.histogram for x in releases])
    c = type_counts.sum(axis=1)
    amre = measures.amre(r, c)
    return {
        "mechanism": task.mechanism,
        "eps": task.eps,
        "w": task.w,
        "seed": task.seed,
        "groups": ";".join(f"{g.w}:{g.eps}" for g in task.groups),
        "amre": amre,
        "ln_amre": math.log(amre) if amre > 0 else float("-inf"),
        "ajsd": measures.ajsd(r, c),
        "mae": measures.mae(r, c),
        "mre": measures.mre(r, c, mre_floor),
        "fresh": float(np.mean([x.fresh for x in releases])),
        "step_us": 1e6 * seconds / len(releases),
    }


def tasks(grid: Grid, seed: int) -> Iterator[Task]:
    for eps in grid.eps_values:
        for w in grid.w_values:
            groups, type_group = assign(grid, eps, w, seed)
            for name in grid.mechanisms:
                yield Task(name, eps, w, seed, groups, type_group)


def type_counts_for(grid: Grid, seed: int) -> Counts:
    """The dataset of ``seed`` aggregated per user type: ``(T, TYPES, d)``."""
    options = dict(grid.dataset_options)
    if "seed" in inspect.signature(LOADERS[grid.dataset]).parameters:
        options.setdefault("seed", seed)  # synthetic data: a new draw per seed
    data = load(grid.dataset, **options)
    n = data.values.shape[1]
    user_type = (np.arange(n) * TYPES) // max(n, 1)
    return group_counts(data.values, user_type, TYPES, data.d)


def run_grid(grid: Grid, jobs: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Run every task of ``grid`` on ``jobs`` processes (default: all cores); rows in order."""
    jobs = jobs or os.cpu_count() or 1
    rows: list[dict[str, Any]] = []
    total = len(grid.seeds) * len(grid.eps_values) * len(grid.w_values) * len(grid.mechanisms)
    bar = tqdm(total=total, desc=f"bench {grid.dataset}", disable=not progress, unit="run")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for seed in grid.seeds:
            data = type_counts_for(grid, seed)
            futures = [pool.submit(run_task, t, data, grid.mre_floor) for t in tasks(grid, seed)]
            for f in futures:
                row = {"dataset": grid.dataset, "setting": grid.setting, **f.result()}
                rows.append(row)
                bar.update()
    bar.close()
    return rows


def summarize(
    rows: Sequence[dict[str, Any]], measure: str = "amre"
) -> dict[tuple[Any, ...], float]:
    """Mean of ``measure`` over seeds per (dataset, eps, w, mechanism)."""
    acc: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for row in rows:
        acc[(row["dataset"], row["eps"], row["w"], row["mechanism"])].append(float(row[measure]))
    return {key: float(np.mean(v)) for key, v in acc.items()}


def write_results(
    rows: Sequence[dict[str, Any]], out_dir: str | Path, grid: Grid, measure: str = "amre"
) -> tuple[Path, Path]:
    """Write ``results.csv`` (every row) and ``results.md`` (mean ``measure`` over seeds)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "results.csv", out / "results.md"
    with csv_path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    means = summarize(rows, measure)
    mechs = list(dict.fromkeys(r["mechanism"] for r in rows))
    points = list(dict.fromkeys((r["dataset"], r["eps"], r["w"]) for r in rows))
    lines = [
        f"# {grid.dataset}: mean {measure.upper()} over seeds {list(grid.seeds)}",
        "",
        f"Setting `{grid.setting}` (ratio {grid.ratio}); parameters: "
        f"`{ {k: v for k, v in asdict(grid).items() if k not in ('mechanisms', 'seeds')} }`.",
        "",
        "| dataset | eps | w | " + " | ".join(mechs) + " |",
        "|---|---|---|" + "---|" * len(mechs),
    ]
    for point in points:
        cells = [f"{means[(*point, m)]:.4g}" if (*point, m) in means else "" for m in mechs]
        lines.append(f"| {point[0]} | {point[1]} | {point[2]} | " + " | ".join(cells) + " |")
    md_path.write_text("\n".join(lines) + "\n")
    return csv_path, md_path
