"""PLDP-IDS experiments: AMSE of the personalized local mechanisms against LPD/LPA (offline).

Reproduces, at a configurable scale, Figs. 2-5 of Du et al., *PLDP-IDS*, §VI (spec
``docs/specs/seed-002-pldp-ids.md`` §6): every user draws its level uniformly from
``eps_i in {eps, eps + 0.5, ..., 2.5}`` and ``w_i in {40, 80, ..., w}`` (the authors' generator,
§6.2; the grid step is a parameter so small runs can scale it down), the personalized methods
run on those levels, and the non-personalized baselines LPD/LPA run at ``(max w_i, min eps_i)``
(spec A5: the paper's "LBD/LBA" are LPD/LPA in its code). The measure is AMSE (§6.3): the mean
over slots and values of the squared frequency error. Every row records its seed and
parameters; mechanisms are built through the registry by
:func:`app.bench.engine.simulate.run_local`.

The personalized methods release simplex-projected estimates (spec A24); the registry's LPD/LPA
release raw GRR estimates. The authors' code projects every estimate, so each baseline also
gets a row ``<name>-proj``: the same run's releases projected (post-processing, no budget; its
``dis`` decisions stay on raw estimates).

:data:`SWEEPS` are the two figures' grids (Table IV: eps sweep at w = 120, w sweep at eps = 1.5)
and :data:`DATASETS` the streams with their default options. Run both figures as
``dpstream bench pldp --out docs/results`` (see ``--help`` for the scale); the CSV is
written before the report, which ``--from-csv`` renders again.

>>> rows = point("sin", ["lpa", "plpa"], eps=1.5, w=8, seed=0, step=4,
...              options={"users": 400, "slots": 20})
>>> [(r["mechanism"], r["levels"]) for r in rows]  # eps_i in {1.5, 2, 2.5}, w_i in {4, 8}
[('lpa', 1), ('lpa-proj', 1), ('plpa', 6)]
"""

from __future__ import annotations

import argparse
import csv
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from app.bench.engine import measures
from app.bench.engine.simulate import run_local
from app.bench.ldp_ids.runs import dataset_values, frequencies
from app.dp import registry
from app.dp.local.pfo import project_simplex
from app.dp.types import Group

PERSONALIZED = (
    "plpd",
    "plpa",
    "plpd+",
    "plpa+",
    "plbd-rp",
    "plba-rp",
    "plbd-ops",
    "plba-ops",
)
BASELINES = ("lpd", "lpa")
EPS_TOP = 2.5
"""The largest personal budget of the paper's grid (Table IV)."""

SWEEPS: dict[str, tuple[tuple[float, ...], tuple[int, ...]]] = {
    "eps": ((0.5, 1.0, 1.5, 2.0, 2.5), (120,)),  # Fig. 2 (ablation: Fig. 4)
    "w": ((1.5,), (40, 80, 120, 160, 200)),  # Fig. 3 (ablation: Fig. 5)
}
"""Sweep -> ``(eps values, w values)`` of Table IV (spec §6.2, A20)."""

DATASETS: dict[str, dict[str, Any]] = {
    "tdrive": {"regions": 5, "slot": "1min"},  # 10 x 10 grid, random cell -> 5 areas (A28)
    "checkins": {"regions": 5, "slot": "100min"},  # needs the Foursquare files (checkins_paths)
    **{s: {"users": 10_000, "slots": 10_000} for s in ("tlns", "sin", "log")},  # Table of §6.1
}
"""Dataset -> its loader options at the paper's size (the sample T-Drive has 593 taxis)."""
REAL = ("tdrive", "checkins")


def checkins_paths() -> tuple[Path, Path]:
    """``<data root>/foursquare/{checkins,pois}.tsv``, the format of
    :func:`app.bench.engine.datasets.load_checkins`."""
    from app.bench.engine.datasets.base import data_root

    root = data_root() / "foursquare"
    return root / "checkins.tsv", root / "pois.tsv"


def load_values(
    dataset: str, seed: int, options: dict[str, Any]
) -> tuple[npt.NDArray[np.integer[Any]], int]:
    """Values ``(T, N)`` and ``d``: check-ins from :func:`checkins_paths` (``FileNotFoundError``
    when absent), the rest through :func:`app.bench.ldp_ids.runs.dataset_values`."""
    if dataset != "checkins":
        return dataset_values(dataset, seed, options)
    from app.bench.engine.datasets import load_checkins

    paths = checkins_paths()
    if not all(p.exists() for p in paths):
        raise FileNotFoundError(f"no Foursquare check-ins at {paths[0].parent}")
    ds = load_checkins(*paths, **options)
    return ds.values[:, (ds.values >= 0).all(axis=0)].astype(np.int64), ds.d


def level_mix(
    eps: float, w: int, users: int, rng: np.random.Generator, step: int = 40
) -> tuple[list[Group], list[int]]:
    """The paper's personal levels: each user uniform over the ``(w_i, eps_i)`` grid.

    Returns the levels that got users and their counts (users are assigned in blocks).
    """
    budgets = np.arange(eps, EPS_TOP + 1e-9, 0.5) if eps <= EPS_TOP else np.array([eps])
    windows = list(range(step, w + 1, step)) or [w]
    grid = [Group(wi, round(float(e), 10)) for e in budgets for wi in windows]
    counts = rng.multinomial(users, np.full(len(grid), 1.0 / len(grid)))
    kept = [(g, int(c)) for g, c in zip(grid, counts, strict=True) if c > 0]
    return [g for g, _ in kept], [c for _, c in kept]


def amse(released: npt.NDArray[np.float64], truth: npt.NDArray[np.float64]) -> float:
    """``(1/(dT)) sum_t sum_j (f̂ - f)**2`` (spec §6.3).

    >>> amse(np.array([[0.5, 0.5], [1.0, 0.0]]), np.array([[0.25, 0.75], [1.0, 0.0]]))
    0.03125
    """
    return float(np.mean((np.asarray(released) - np.asarray(truth)) ** 2))


def point(
    dataset: str,
    mechanisms: Sequence[str],
    eps: float,
    w: int,
    seed: int,
    step: int = 40,
    options: dict[str, Any] | None = None,
    values: tuple[npt.NDArray[np.integer[Any]], int] | None = None,
) -> list[dict[str, Any]]:
    """One row per mechanism (and projected baseline) at one ``(eps, w)`` and seed: AMSE,
    AJSD (Eq. 16, natural log, on the simplex-projected release as spec §6.3 asks of every
    method: a raw baseline row carries its projection's AJSD), publications, run time.
    ``values`` skips loading (the data of ``dataset`` for ``seed``)."""
    data, d = values if values is not None else load_values(dataset, seed, dict(options or {}))
    n = data.shape[1]
    levels, counts = level_mix(eps, w, n, np.random.default_rng([seed, 2]), step)
    truth = frequencies(data, d)
    rows = []
    for name in mechanisms:
        if name in BASELINES:  # (max w_i, min eps_i), for every user
            params: dict[str, Any] = {
                "eps": min(g.eps for g in levels),
                "w": max(g.w for g in levels),
                "users": n,
            }
        else:
            params = {"groups": levels, "users": counts}
        assert registry.get(name).kind == "local"
        began = time.perf_counter()
        run = run_local(data, d, name, params, np.random.default_rng([seed, 1]), keep="counts")
        released = run.histograms()
        projected = (
            np.array([project_simplex(h) for h in released]) if name in BASELINES else released
        )
        row = {
            "dataset": dataset,
            "mechanism": name,
            "eps": eps,
            "w": w,
            "users": n,
            "slots": data.shape[0],
            "d": d,
            "seed": seed,
            "step": step,
            "levels": len(params.get("groups", [0])),
            "amse": amse(released, truth),
            "ajsd": measures.ajsd(projected, truth),
            "publications": sum(r.fresh for r in run.releases),
            "run_s": round(time.perf_counter() - began, 3),
        }
        rows.append(row)
        if name in BASELINES:
            rows.append({**row, "mechanism": f"{name}-proj", "amse": amse(projected, truth)})
    return rows


def run(
    datasets: Sequence[str],
    sweeps: Sequence[str],
    seeds: Sequence[int],
    mechanisms: Sequence[str],
    options: dict[str, dict[str, Any]],
    step: int = 40,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Every mechanism at every point of every sweep, per dataset and seed (data loaded once
    per (dataset, seed)); the default point shared by both sweeps runs once, both
    sweeps' rows carry it (column ``sweep``)."""
    rows: list[dict[str, Any]] = []
    todo = [(dataset, seed) for dataset in datasets for seed in seeds]
    for dataset, seed in tqdm(todo, desc="bench pldp", unit="seed", disable=not progress):
        values = load_values(dataset, seed, dict(options.get(dataset, {})))
        done: dict[tuple[float, int], list[dict[str, Any]]] = {}
        for sweep in sweeps:
            eps_values, w_values = SWEEPS[sweep]
            for e in eps_values:
                for w in w_values:
                    if (e, w) not in done:
                        done[e, w] = point(dataset, mechanisms, e, w, seed, step, values=values)
                    rows += [{"sweep": sweep, **r} for r in done[e, w]]
    return rows


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Every row, with its seed and parameters."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    return out


def read_csv(path: str | Path) -> list[dict[str, Any]]:
    """Rows of :func:`write_csv` with their numbers parsed back."""
    ints = {"w", "users", "slots", "d", "seed", "step", "levels", "publications"}
    floats = {"eps", "amse", "ajsd", "run_s"}
    with Path(path).open(newline="") as fh:
        return [
            {k: int(v) if k in ints else float(v) if k in floats else v for k, v in r.items()}
            for r in csv.DictReader(fh)
        ]


QUICK = {"seeds": 1, "slots": 200, "real_slots": 240, "users": 2_000}
"""``--quick``: one seed, 200 synthetic slots of 2,000 users, the first 240 Taxi slots (an
option given overrides its value here)."""
SEEDS = 1
"""The seeds 0..n-1 without ``--seeds`` or ``--quick`` (the paper's: 10)."""
FIGURES = tuple(SWEEPS)
"""``--figure``: one sweep (default both)."""
OUT = None
"""No default ``--out``: print the claims only."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``dpstream bench pldp`` beside the common ones
    (:func:`app.bench.papers.add_common`)."""
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--mechanisms", nargs="+", default=[*BASELINES, *PERSONALIZED])
    parser.add_argument("--step", type=int, default=40, help="grid step of the personal w_i")
    parser.add_argument("--users", type=int, help="synthetic users (default 10,000)")
    parser.add_argument("--slots", type=int, help="synthetic slots (default 10,000)")
    parser.add_argument("--real-slots", type=int, help="first T slots of the real data")
    parser.add_argument("--from-csv", type=Path, help="render a finished run's CSV, run nothing")


def run_cli(args: argparse.Namespace) -> int:
    """Run (or, ``--from-csv``, re-render) the sweeps; print the claims, write ``--out``."""
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) is None:
                setattr(args, key, value)
    if args.seeds is None:
        args.seeds = SEEDS
    began = time.perf_counter()
    rows = read_csv(args.from_csv) if args.from_csv else _run_args(args)
    seconds = time.perf_counter() - began
    if args.out and not args.from_csv:
        write_csv(rows, args.out / "pldp-results.csv")
    from app.bench.pldp.claims import markdown

    if args.out:
        from app.bench.pldp.plots import plot_all

        plot_all(rows, args.out)
    print(markdown(rows) + ("" if args.from_csv else f"\n\nWall time {seconds:.0f} s."))
    return 0


def _run_args(args: argparse.Namespace) -> list[dict[str, Any]]:
    options = {k: dict(v) for k, v in DATASETS.items()}
    for ds, opts in options.items():
        if ds in REAL:
            opts.update({"T": args.real_slots} if args.real_slots else {})
        else:
            opts.update({"users": args.users} if args.users else {})
            opts.update({"slots": args.slots} if args.slots else {})
    datasets = list(args.datasets)
    if "checkins" in datasets and not all(p.exists() for p in checkins_paths()):
        print(f"checkins skipped: no Foursquare files at {checkins_paths()[0].parent}")
        datasets.remove("checkins")
    sweeps = [args.figure] if args.figure else list(SWEEPS)
    return run(datasets, sweeps, range(args.seeds), args.mechanisms, options, args.step)
