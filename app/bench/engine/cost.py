"""Cost benchmarks of the central mechanisms: step time against ``d``, ``m`` and ``N``.

Two plain functions, each writing into an output folder:

:func:`step_times`
    Times ``step`` of every central mechanism over one axis at a time: the number of cells
    ``d``, of requirement groups ``m`` and of users ``N``, the other two at their base values.
    Writes ``cost_steps.csv`` (one row per point), ``cost_slopes.csv`` (the log-log slope of step
    time on each axis, fitted over the whole sweep and between its two largest points, where the
    fixed per-call overhead matters least, with the claim both are checked against) and
    ``cost_<axis>.png``.
    The claim (issue 6): step time grows at most linearly in ``d`` and ``m`` (slope <= 1, with
    :data:`SLOPE_TOLERANCE` for timer noise) and not with ``N`` (slope ~ 0): a central
    mechanism only sees the ``(m, d)`` counts. Aggregating users into counts
    (:func:`app.bench.engine.replay.group_counts`) is O(N) and is timed separately as
    ``aggregate_s``.
:func:`tdrive_replay`
    Replays the whole T-Drive sample (every slot) through every central mechanism and writes
    ``tdrive_replay.csv`` with load, aggregation and replay times.

Requirement groups cycle through the PWSM defaults' grid (spec seed-000 §6.2-6.3):
``w`` in {40, 80, 120} and ``eps`` in {0.6, 0.8, 1.0}. Mechanisms are built only through
:func:`app.dp.registry.create`. Every row records the seed, the parameters and the machine
(CPU count, load average), because timings on a shared machine are noisy.
"""

from __future__ import annotations

import csv
import math
import os
import platform
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.bench.engine.replay import group_counts, group_sizes
from app.dp.interfaces import as_slotted
from app.dp.registry import create, names
from app.dp.types import Group

__all__ = ["SLOPE_TOLERANCE", "groups_for", "machine", "step_times", "tdrive_replay"]

W_GRID = (40, 80, 120)
EPS_GRID = (0.6, 0.8, 1.0)

SLOPE_TOLERANCE = 0.25
"""Allowance on the log-log slopes for timer noise: ``d``, ``m`` pass below 1.25, ``N`` below
0.25."""

AXES = ("d", "m", "N")

GROUPS_NOTE = "cycle w=40/80/120 x eps=0.6/0.8/1.0"


def groups_for(m: int) -> list[Group]:
    """``m`` requirement groups cycling through the PWSM grid.

    >>> groups_for(4)
    [Group(w=40, eps=0.6), Group(w=80, eps=0.6), Group(w=120, eps=0.6), Group(w=40, eps=0.8)]
    """
    return [Group(W_GRID[g % 3], EPS_GRID[(g // 3) % 3]) for g in range(m)]


def machine() -> dict[str, Any]:
    """What the timings ran on: CPU count, load average, platform, numpy version."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (math.nan,) * 3
    return {
        "cpus": os.cpu_count(),
        "load1": round(load[0], 2),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


def _slot_counts(
    d: int, m: int, n: int, slots: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], float]:
    """``slots`` random ``(m, d)`` count matrices from ``n`` users, and the aggregation time.

    Users are split evenly over the groups and pick uniform cells; the counts come from
    :func:`group_counts`, whose time per slot is returned.
    """
    values = rng.integers(0, d, size=(slots, n), dtype=np.int16 if d < 2**15 else np.int32)
    user_group = user_groups(n, m)
    began = time.perf_counter()
    counts = group_counts(values, user_group, m, d)
    return counts, (time.perf_counter() - began) / slots


def user_groups(n: int, m: int) -> npt.NDArray[np.int64]:
    """The group of each of ``n`` users: ``m`` contiguous, nearly equal blocks."""
    return np.arange(n, dtype=np.int64) * m // max(n, 1)


def _time_steps(
    name: str, d: int, m: int, n: int, counts: npt.NDArray[np.int64], seed: int
) -> float:
    """Seconds per ``step`` of a fresh mechanism over the slots of ``counts`` (``n`` users)."""
    mech = as_slotted(create(name, d=d, groups=groups_for(m)))
    population = group_sizes(user_groups(n, m), m)
    rng = np.random.default_rng(seed)
    began = time.perf_counter()
    for c in counts:
        mech.step(c, rng, population)
    return (time.perf_counter() - began) / len(counts)


def _slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``log y`` on ``log x``."""
    if len(x) < 2:
        return math.nan
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _plot(path: Path, axis: str, rows: list[dict[str, Any]], base: dict[str, int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["mechanism"] for r in rows):
        mine = [r for r in rows if r["mechanism"] == name]
        ax.plot([r[axis] for r in mine], [r["step_s"] * 1e3 for r in mine], marker="o", label=name)
    if axis == "N":
        agg = [r for r in rows if r["mechanism"] == rows[0]["mechanism"]]
        ax.plot(
            [r["N"] for r in agg],
            [r["aggregate_s"] * 1e3 for r in agg],
            "k--",
            label="group_counts (not in step)",
        )
    others = ", ".join(f"{k}={v}" for k, v in base.items() if k != axis)
    ax.set(xscale="log", yscale="log", xlabel=axis, ylabel="ms per slot", title=f"step vs {axis}")
    ax.set_title(f"step time vs {axis} ({others})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def step_times(
    out_dir: str | Path,
    *,
    mechanisms: Iterable[str] | None = None,
    d_values: Sequence[int] = (10, 100, 1_000, 10_000),
    m_values: Sequence[int] = (1, 3, 10, 30, 100),
    n_values: Sequence[int] = (1_000, 10_000, 100_000, 1_000_000),
    base_d: int = 100,
    base_m: int = 10,
    base_n: int = 10_000,
    slots: int = 50,
    repeats: int = 3,
    seed: int = 0,
    plot: bool = True,
) -> list[dict[str, Any]]:
    """Time ``step`` per slot along each axis; write CSVs (and PNGs); return the point rows.

    Parameters
    ----------
    out_dir
        Output folder (created).
    mechanisms
        Central mechanism names; default every registered one.
    d_values, m_values, n_values
        Sweep of each axis; the other two stay at ``base_d``, ``base_m``, ``base_n``.
    slots
        Slots stepped per measurement; ``step_s`` is the best of ``repeats`` means.
    seed
        Seeds the counts and each mechanism's noise.
    plot
        Write ``cost_<axis>.png`` (needs matplotlib, the ``bench`` extra).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mechs = list(names("central") if mechanisms is None else mechanisms)
    base = {"d": base_d, "m": base_m, "N": base_n}
    sweeps = {"d": d_values, "m": m_values, "N": n_values}
    host = machine()
    warm, _ = _slot_counts(base_d, base_m, 100, 5, np.random.default_rng(seed))
    for name in mechs:  # first calls pay for imports and caches: keep them out of the table
        _time_steps(name, base_d, base_m, 100, warm, seed)
    rows: list[dict[str, Any]] = []
    for axis in AXES:
        for x in sweeps[axis]:
            point = {**base, axis: int(x)}
            rng = np.random.default_rng(seed)
            counts, aggregate_s = _slot_counts(point["d"], point["m"], point["N"], slots, rng)
            for name in mechs:
                best = min(
                    _time_steps(name, point["d"], point["m"], point["N"], counts, seed)
                    for _ in range(repeats)
                )
                rows.append(
                    {
                        "mechanism": name,
                        "axis": axis,
                        **point,
                        "slots": slots,
                        "repeats": repeats,
                        "seed": seed,
                        "groups": GROUPS_NOTE,
                        "step_s": best,
                        "aggregate_s": aggregate_s,
                        **host,
                    }
                )
    _write_csv(out / "cost_steps.csv", rows)
    slopes: list[dict[str, Any]] = []
    for axis in AXES:
        limit = (0.0 if axis == "N" else 1.0) + SLOPE_TOLERANCE
        for name in mechs:
            mine = [r for r in rows if r["axis"] == axis and r["mechanism"] == name]
            xs, ys = [r[axis] for r in mine], [r["step_s"] for r in mine]
            slope, top = _slope(xs, ys), _slope(xs[-2:], ys[-2:])
            slopes.append(
                {
                    "mechanism": name,
                    "axis": axis,
                    "slope": round(slope, 3),
                    "slope_top": round(top, 3),
                    "claim": "not with N" if axis == "N" else f"at most linear in {axis}",
                    "limit": limit,
                    "holds": None if math.isnan(top) else bool(max(slope, top) <= limit),
                    "seed": seed,
                    **host,
                }
            )
    _write_csv(out / "cost_slopes.csv", slopes)
    if plot:
        for axis in AXES:
            _plot(out / f"cost_{axis}.png", axis, [r for r in rows if r["axis"] == axis], base)
    return rows


def tdrive_replay(
    out_dir: str | Path,
    *,
    mechanisms: Iterable[str] | None = None,
    m: int = 10,
    seed: int = 0,
    **dataset_options: Any,
) -> list[dict[str, Any]]:
    """Replay every slot of the T-Drive sample through each central mechanism, timed.

    Taxis are split into ``m`` contiguous blocks (the PWSM code's user types, spec seed-000
    §6.3), block ``g`` getting ``groups_for(m)[g]``. ``dataset_options`` go to
    :func:`app.bench.engine.datasets.load_tdrive` (default: 10 x 10 grid, 1-minute slots, carry).
    Writes ``tdrive_replay.csv`` and returns its rows.
    """
    from app.bench.engine.datasets import load_tdrive

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    ds = load_tdrive(**dataset_options)
    load_s = time.perf_counter() - began
    user_group = user_groups(ds.N, m)
    population = group_sizes(user_group, m)  # every taxi, whether or not it has a record
    began = time.perf_counter()
    counts = group_counts(ds.values, user_group, m, ds.d)
    aggregate_s = time.perf_counter() - began
    host = machine()
    groups = groups_for(m)
    rows: list[dict[str, Any]] = []
    for name in names("central") if mechanisms is None else mechanisms:
        mech = as_slotted(create(name, d=ds.d, groups=groups))
        rng = np.random.default_rng(seed)
        fresh = 0
        began = time.perf_counter()
        for c in counts:
            fresh += mech.step(c, rng, population).fresh
        replay_s = time.perf_counter() - began
        rows.append(
            {
                "mechanism": name,
                "T": ds.T,
                "N": ds.N,
                "d": ds.d,
                "m": m,
                "groups": ";".join(f"{g.w}:{g.eps}" for g in groups),
                "seed": seed,
                "load_s": round(load_s, 3),
                "aggregate_s": round(aggregate_s, 3),
                "replay_s": round(replay_s, 3),
                "step_us": round(replay_s / max(ds.T, 1) * 1e6, 1),
                "publications": fresh,
                "source": ds.source,
                **{k: v for k, v in ds.provenance().items() if k.startswith("opt_")},
                **host,
            }
        )
    _write_csv(out / "tdrive_replay.csv", rows)
    return rows
