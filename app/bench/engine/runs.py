"""The runs behind RESULTS.md: which (preset, dataset) pairs, running or reusing them, and the
facts of the machine they ran on.

:data:`RUNS` lists the runs the claims need. :func:`run_all` runs them (or, with ``reuse``,
reads back their ``results.csv``) and keeps their wall times in ``<out_root>/runs.json``;
whenever it runs something it records :func:`machine` in ``<out_root>/machine.json``, so a
report made later from reused runs still names the machine that measured them.

>>> sorted(machine())
['cpus', 'numpy', 'platform', 'python']
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.bench.engine.presets import Preset, resolve, run_rows, write_tables
from app.bench.engine.runner import run_preset

__all__ = ["RUNS", "Done", "Rows", "machine", "read_csv", "recorded_machine", "run_all"]

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

MACHINE_FILE = "machine.json"


def read_csv(path: Path) -> Rows:
    """A run's ``results.csv``, with its numeric columns typed back."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k in NUMERIC:
            if k in r:
                r[k] = float(r[k])
        for k in INTEGER:
            if k in r:
                r[k] = int(r[k])
    return rows


def machine() -> dict[str, str]:
    """Facts of this machine, measured now: platform, CPU count, Python and numpy versions."""
    import numpy

    return {
        "platform": platform.platform(),
        "cpus": str(os.cpu_count() or 0),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
    }


def recorded_machine(out_root: str | Path) -> dict[str, str] | None:
    """The machine :func:`run_all` recorded in ``out_root``, or None if it never ran there."""
    path = Path(out_root) / MACHINE_FILE
    return dict(json.loads(path.read_text())) if path.exists() else None


def _reuse(
    preset: Preset, folder: Path, walls: dict[str, float], key: str, **run: Any
) -> tuple[Rows, bool]:
    """Read back a run; run only the preset's mechanisms missing from it and merge them in."""
    from app.bench.engine.plots import plot_preset

    rows = read_csv(folder / "results.csv")
    have = {str(r["mechanism"]) for r in rows}
    missing = tuple(m for m in preset.mechanisms if m not in have)
    if missing:
        began = time.perf_counter()
        rows = rows + run_rows(replace(preset, mechanisms=missing), **run)
        walls[key] = round(walls.get(key, 0.0) + time.perf_counter() - began, 1)
        write_tables(rows, folder, preset, walls[key])
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
) -> Done:
    """Run (or reuse) every run; ``(preset, dataset) -> (preset, rows, wall seconds)``.

    A reused run whose ``results.csv`` lacks some of the preset's mechanisms (a mechanism added
    to the preset since) runs only those, on the same seeds and sweep points, and merges them
    in; its wall time is the sum of both runs.
    """
    root = Path(out_root)
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "runs.json"
    walls: dict[str, float] = json.loads(log_path.read_text()) if log_path.exists() else {}
    done: Done = {}
    for name, dataset in runs:
        preset = resolve(name, dataset=dataset, quick=quick)
        key = f"{name}-{dataset}"
        folder = root / key
        if reuse and (folder / "results.csv").exists():
            rows, ran = _reuse(preset, folder, walls, key, jobs=jobs, progress=progress)
        else:
            began = time.perf_counter()
            rows, _ = run_preset(preset, folder, jobs=jobs, progress=progress)
            walls[key], ran = round(time.perf_counter() - began, 1), True
        if ran:
            log_path.write_text(json.dumps(walls, indent=1))
            (root / MACHINE_FILE).write_text(json.dumps(machine(), indent=1))
        done[(name, dataset)] = (preset, rows, walls.get(key, math.nan))
    return done
