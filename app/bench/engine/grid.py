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

A two-group grid sweeps the ratio ``o`` over ``ratios`` (the PWSM Figs. 12-13 x axis; rows then
carry a ``ratio`` column), or uses the single ``ratio``.

Non-personalized mechanisms (Uniform, Sample, BD, BA) run at ``(w, eps)`` itself, which is
conservative for every user (§5.2), on the summed counts. PLBU (:data:`LOCAL_PERSONALIZED`), the
PWSM figures' local baseline, runs offline through
:func:`app.bench.engine.simulate.run_local` on the
per-user values, its requirement groups being the types' ``(w, eps)``; it releases frequencies,
which are scaled by the number of users ``N`` to counts (spec §2.11: ``r_t = sum_g C_g``) so its
AMRE is on the same scale as the central mechanisms'. Every row of the results records the
dataset, setting, sweep point, mechanism, seed and the measures of :mod:`app.bench.engine.measures`.
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

from app.bench.engine import measures
from app.bench.engine.datasets import LOADERS, load
from app.bench.engine.replay import group_counts, group_sizes
from app.bench.engine.simulate import run_local
from app.dp.interfaces import as_slotted
from app.dp.registry import create, get
from app.dp.types import Group

TYPES = 10
EPS_GRID = (0.2, 0.4, 0.6, 0.8, 1.0)
W_GRID = (40, 80, 120, 160, 200)
SETTINGS = ("types", "two-eps", "two-w", "single")
TWO_GROUP = ("two-eps", "two-w")
LOCAL_PERSONALIZED = ("plbu",)
"""Local mechanisms a grid runs too: they take the requirement groups (one per type group)."""
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
    ratios: tuple[float, ...] = ()
    mre_floor: float = 1.0
    dataset_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.setting not in SETTINGS:
            raise ValueError(f"setting must be one of {SETTINGS}, got {self.setting!r}")
        for name in self.mechanisms:
            if get(name).kind != "central" and name not in LOCAL_PERSONALIZED:
                raise ValueError(
                    f"grid runs central mechanisms and {LOCAL_PERSONALIZED}; "
                    f"{name!r} is {get(name).kind}"
                )
        for r in (self.ratio, *self.ratios):
            if not 0 <= r <= 1:
                raise ValueError(f"ratio must be in [0, 1], got {r}")
        if self.ratios and self.setting not in TWO_GROUP:
            raise ValueError(f"ratios sweep a two-group setting {TWO_GROUP}, not {self.setting!r}")

    def ratio_values(self) -> tuple[float | None, ...]:
        """The ratios a two-group grid runs (``ratios``, else ``ratio``); ``(None,)`` otherwise."""
        if self.setting not in TWO_GROUP:
            return (None,)
        return self.ratios or (self.ratio,)


@dataclass(frozen=True)
class Task:
    """One mechanism at one sweep point on one seed's data."""

    mechanism: str
    eps: float
    w: int
    seed: int
    groups: tuple[Group, ...]
    type_group: tuple[int, ...]
    ratio: float | None = None


def assign(
    grid: Grid, eps: float, w: int, seed: int, ratio: float | None = None
) -> tuple[tuple[Group, ...], tuple[int, ...]]:
    """Requirement groups and the group of each user type at a sweep point (module docstring);
    ``ratio`` (default ``grid.ratio``) is the two-group settings' ``o``."""
    if grid.setting == "types":
        rng = np.random.default_rng([seed, int(eps * 1000), w])
        eps_choices = [e for e in EPS_GRID if e >= eps] or [eps]
        w_choices = [x for x in W_GRID if x <= w] or [w]
        per_type = [
            Group(int(rng.choice(w_choices)), float(rng.choice(eps_choices))) for _ in range(TYPES)
        ]
    else:
        special = round((grid.ratio if ratio is None else ratio) * TYPES)
        high = {"two-eps": Group(w, 1.0), "two-w": Group(40, eps), "single": Group(w, eps)}
        per_type = [high[grid.setting] if k < special else Group(w, eps) for k in range(TYPES)]
    groups = tuple(dict.fromkeys(per_type))
    return groups, tuple(groups.index(g) for g in per_type)


def run_task(
    task: Task, type_counts: Counts, type_users: Counts, mre_floor: float
) -> dict[str, Any]:
    """Replay the stream through one central mechanism and measure it against the truth.

    ``type_users`` is the number of users of each type: the public population OBS takes.
    """
    cls = get(task.mechanism)
    personalized = bool(getattr(cls, "personalized", True))
    m_groups = len(task.groups) if personalized else 1
    counts = np.zeros((type_counts.shape[0], m_groups, type_counts.shape[2]), dtype=np.int64)
    population = np.zeros(m_groups, dtype=np.int64)
    for k, g in enumerate(task.type_group):
        counts[:, g if personalized else 0] += type_counts[:, k]
        population[g if personalized else 0] += type_users[k]
    groups = list(task.groups) if personalized else [Group(task.w, task.eps)]
    mech = as_slotted(create(task.mechanism, d=type_counts.shape[2], groups=groups))
    rng = np.random.default_rng([task.seed, 7919])
    start = time.perf_counter()
    releases = [mech.step(c, rng, population) for c in counts]
    seconds = time.perf_counter() - start
    r = np.array([x.histogram for x in releases])
    fresh = float(np.mean([x.fresh for x in releases]))
    return _row(task, r, type_counts.sum(axis=1), fresh, seconds, mre_floor)


def run_local_task(
    task: Task, dataset: str, options: dict[str, Any], type_counts: Counts, mre_floor: float
) -> dict[str, Any]:
    """Run a local personalized mechanism (PLBU) on the per-user values of ``dataset``.

    The worker loads the values itself (``options`` as for :func:`type_counts_for`, seed
    included) so no ``(T, N)`` array crosses processes. Users are ordered by group (a relabelling;
    the release is a sum over users), the groups being the types' requirement groups; the
    released frequencies are scaled by ``N`` to counts.
    """
    data = load(dataset, **options)
    values = data.values
    if values.min() < 0:
        raise ValueError(f"{task.mechanism} needs a value for every user at every slot")
    n = values.shape[1]
    user_group = np.asarray(task.type_group, dtype=np.int64)[(np.arange(n) * TYPES) // n]
    order = np.argsort(user_group, kind="stable")
    sizes = np.bincount(user_group, minlength=len(task.groups))
    keep = sizes > 0
    groups = [g for g, k in zip(task.groups, keep, strict=True) if k]
    rng = np.random.default_rng([task.seed, 7919])
    start = time.perf_counter()
    run = run_local(
        values[:, order],
        data.d,
        task.mechanism,
        {"groups": groups, "users": [int(x) for x in sizes[keep]]},
        rng,
        keep="counts",
    )
    seconds = time.perf_counter() - start
    r = run.histograms() * n  # frequencies -> counts (sum over groups of n_g * f_g)
    fresh = float(np.mean([x.fresh for x in run.releases]))
    return _row(task, r, type_counts.sum(axis=1), fresh, seconds, mre_floor)


def _row(
    task: Task, r: npt.NDArray[Any], c: Counts, fresh: float, seconds: float, mre_floor: float
) -> dict[str, Any]:
    amre = measures.amre(r, c)
    ratio = {} if task.ratio is None else {"ratio": task.ratio}
    return {
        "mechanism": task.mechanism,
        "eps": task.eps,
        "w": task.w,
        **ratio,
        "seed": task.seed,
        "groups": ";".join(f"{g.w}:{g.eps}" for g in task.groups),
        "amre": amre,
        "ln_amre": math.log(amre) if amre > 0 else float("-inf"),
        "ajsd": measures.ajsd(r, c),
        "mae": measures.mae(r, c),
        "mre": measures.mre(r, c, mre_floor),
        "fresh": fresh,
        "step_us": 1e6 * seconds / max(len(r), 1),
    }


def tasks(grid: Grid, seed: int) -> Iterator[Task]:
    for ratio in grid.ratio_values():
        for eps in grid.eps_values:
            for w in grid.w_values:
                groups, type_group = assign(grid, eps, w, seed, ratio)
                for name in grid.mechanisms:
                    yield Task(name, eps, w, seed, groups, type_group, ratio)


def load_options(grid: Grid, seed: int) -> dict[str, Any]:
    """The loader options of ``seed``: synthetic data is a new draw per seed."""
    options = dict(grid.dataset_options)
    if "seed" in inspect.signature(LOADERS[grid.dataset]).parameters:
        options.setdefault("seed", seed)
    return options


def type_counts_for(grid: Grid, seed: int) -> tuple[Counts, Counts]:
    """The dataset of ``seed`` aggregated per user type, ``(T, TYPES, d)``, and the number of
    users of each type, ``(TYPES,)``."""
    data = load(grid.dataset, **load_options(grid, seed))
    n = data.values.shape[1]
    user_type = (np.arange(n) * TYPES) // max(n, 1)
    return group_counts(data.values, user_type, TYPES, data.d), group_sizes(user_type, TYPES)


def run_grid(grid: Grid, jobs: int | None = None, progress: bool = True) -> list[dict[str, Any]]:
    """Run every task of ``grid`` on ``jobs`` processes (default: all cores); rows in order."""
    jobs = jobs or os.cpu_count() or 1
    rows: list[dict[str, Any]] = []
    total = len(grid.seeds) * len(grid.eps_values) * len(grid.w_values) * len(grid.mechanisms)
    total *= len(grid.ratio_values())
    bar = tqdm(total=total, desc=f"bench {grid.dataset}", disable=not progress, unit="run")
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for seed in grid.seeds:
            data, users = type_counts_for(grid, seed)
            options = load_options(grid, seed)
            futures = [
                pool.submit(run_local_task, t, grid.dataset, options, data, grid.mre_floor)
                if t.mechanism in LOCAL_PERSONALIZED
                else pool.submit(run_task, t, data, users, grid.mre_floor)
                for t in tasks(grid, seed)
            ]
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
