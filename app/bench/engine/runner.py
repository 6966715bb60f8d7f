"""Run one preset: its grid, then its tables and plots (:mod:`app.bench.engine.presets` says what a
preset is, :mod:`app.bench.engine.plots` draws it; this module sits above both)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.bench.engine.plots import plot_preset
from app.bench.engine.presets import Preset, run_rows, write_tables


def run_preset(
    preset: Preset,
    out_dir: str | Path,
    jobs: int | None = None,
    progress: bool = True,
    runner: Callable[..., list[dict[str, Any]]] = run_rows,
) -> tuple[list[dict[str, Any]], list[Path]]:
    """Run ``preset``; write ``results.csv``, ``results.md`` and the PNGs into ``out_dir``.

    Returns the rows and the written paths. ``runner`` is for tests.
    """
    began = time.perf_counter()
    rows = runner(preset, jobs=jobs, progress=progress)
    seconds = time.perf_counter() - began
    out = Path(out_dir)
    paths = write_tables(rows, out, preset, seconds)
    paths += plot_preset(rows, out, preset)
    return rows, paths
