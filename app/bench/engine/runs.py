"""The runs behind RESULTS.md: which (preset, dataset) pairs, and running or reusing them.

:data:`RUNS` lists the runs the claims need. :func:`run_all` runs them (or, with ``reuse``,
reads back their ``results.csv.gz``) into the run store (:mod:`app.bench.engine.store`):
one folder per run under ``out_root``, gzipped rows, and a record of each run that ran (its
command, commit, machine, wall time) in ``<out_root>/runs.json``, so a report made later from
reused runs still names the machine that measured them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.bench.engine.presets import Preset, resolve, run_rows, write_tables
from app.bench.engine.runner import run_preset
from app.bench.engine.store import find, gzip_file, read_rows, record, records

__all__ = [
    "RUNS",
    "Done",
    "Rows",
    "command",
    "read_csv",
    "recorded_machine",
    "recorded_machines",
    "run_all",
]

RUNS: tuple[tuple[str, str], ...] = (
    *((p, d) for p in ("pwsm-eps", "pwsm-w") for d in ("tdrive", "tlns", "sin", "log")),
    *((p, d) for p in ("pwsm-ratio-eps", "pwsm-ratio-w") for d in ("tdrive", "tlns", "sin", "log")),
    *((p, d) for p in ("ldp-ids-eps", "ldp-ids-w") for d in ("lns", "sin", "log", "tdrive")),
    *(("ldp-ids-cfpu", d) for d in ("sin", "log", "tdrive")),
)
"""Every (preset, dataset) run that RESULTS.md reads."""

NUMERIC = ("eps", "ratio", "amre", "ln_amre", "mre", "mae", "cfpu", "fresh", "step_us", "run_s")
INTEGER = ("w", "seed", "users", "slots", "d", "publications")

Rows = list[dict[str, Any]]
Done = dict[tuple[str, str], tuple[Preset, Rows, float]]
"""``(preset, dataset) -> (preset, rows, wall seconds)``."""

ROWS = "results.csv"
"""A run's rows in its folder (kept as ``results.csv.gz``)."""


def read_csv(path: Path) -> Rows:
    """A run's ``results.csv`` (or its ``.gz``), with its numeric columns typed back."""
    rows: Rows = list(read_rows(find(path) or path))
    for r in rows:
        for k in NUMERIC:
            if k in r:
                r[k] = float(r[k])
        for k in INTEGER:
            if k in r:
                r[k] = int(r[k])
    return rows


def command(
    name: str, dataset: str, out_root: Path, quick: bool = False, seeds: int | None = None
) -> str:
    """The verb that makes run ``(name, dataset)`` into ``out_root``.

    >>> command("ldp-ids-cfpu", "sin", Path("docs/results"))
    'dpstream bench ldp-ids --figure cfpu --dataset sin --out docs/results'
    >>> command("pwsm-eps", "sin", Path("out"), quick=True, seeds=2)
    'dpstream bench pwsm --figure eps --dataset sin --quick --seeds 2 --out out'
    """
    paper = "ldp-ids" if name.startswith("ldp-ids-") else name.split("-", 1)[0]
    figure = name.removeprefix(paper + "-")
    flags = (" --quick" if quick else "") + (f" --seeds {seeds}" if seeds is not None else "")
    return f"dpstream bench {paper} --figure {figure} --dataset {dataset}{flags} --out {out_root}"


def recorded_machine(
    out_root: str | Path, keys: Sequence[str] | None = None
) -> dict[str, str] | None:
    """The machine recorded for the runs ``keys`` (all runs if None) under ``out_root``: the
    first one found, or None if none of them recorded one."""
    log = records(out_root)
    for key in log if keys is None else keys:
        found = log.get(key, {}).get("machine")
        if found:
            return dict(found)
    return None


def recorded_machines(
    out_root: str | Path, keys: Sequence[str]
) -> list[tuple[dict[str, str], list[str]]]:
    """Each distinct machine recorded for the runs ``keys`` under ``out_root``, with the runs
    it measured, in the order first found (runs that recorded none are left out)."""
    log = records(out_root)
    found: list[tuple[dict[str, str], list[str]]] = []
    for key in keys:
        machine = log.get(key, {}).get("machine")
        if not machine:
            continue
        for known, runs in found:
            if known == machine:
                runs.append(key)
                break
        else:
            found.append((dict(machine), [key]))
    return found


def _reuse(
    preset: Preset, folder: Path, walls: dict[str, float], key: str, **run: Any
) -> tuple[Rows, bool]:
    """Read back a run; run only the preset's mechanisms missing from it and merge them in."""
    from app.bench.engine.plots import plot_preset

    rows = read_csv(folder / ROWS)
    have = {str(r["mechanism"]) for r in rows}
    missing = tuple(m for m in preset.mechanisms if m not in have)
    if missing:
        began = time.perf_counter()
        rows = rows + run_rows(replace(preset, mechanisms=missing), **run)
        walls[key] = round(walls.get(key, 0.0) + time.perf_counter() - began, 1)
        write_tables(rows, folder, preset, walls[key])
        gzip_file(folder / ROWS)
    plot_preset(rows, folder, preset)  # redraw: figures follow the plotting code
    return rows, bool(missing)


def run_all(
    out_root: str | Path,
    *,
    quick: bool = False,
    reuse: bool = False,
    jobs: int | None = None,
    runs: Sequence[tuple[str, str]] = RUNS,
    progress: bool = True,
    seeds: int | None = None,
) -> Done:
    """Run (or reuse) every run; ``(preset, dataset) -> (preset, rows, wall seconds)``.

    A reused run whose ``results.csv`` lacks some of the preset's mechanisms (a mechanism added
    to the preset since) runs only those, on the same seeds and sweep points, and merges them
    in; its wall time is the sum of both runs. ``seeds`` (n) replaces each preset's seeds
    by 0..n-1.
    """
    root = Path(out_root)
    root.mkdir(parents=True, exist_ok=True)
    log = records(root)
    walls = {k: float(v["wall_s"]) for k, v in log.items() if "wall_s" in v}
    done: Done = {}
    for name, dataset in runs:
        preset = resolve(name, dataset=dataset, quick=quick)
        if seeds is not None:
            preset = replace(preset, seeds=tuple(range(seeds)))
        key = f"{name}-{dataset}"
        folder = root / key
        if reuse and find(folder / ROWS):
            rows, ran = _reuse(preset, folder, walls, key, jobs=jobs, progress=progress)
        else:
            began = time.perf_counter()
            rows, _ = run_preset(preset, folder, jobs=jobs, progress=progress)
            gzip_file(folder / ROWS)
            walls[key], ran = round(time.perf_counter() - began, 1), True
        if ran:
            record(root, key, command=command(name, dataset, root, quick, seeds), wall_s=walls[key])
        done[(name, dataset)] = (preset, rows, walls.get(key, math.nan))
    return done
