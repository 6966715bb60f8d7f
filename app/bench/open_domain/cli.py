"""``dpstream bench open-domain``: the grid, its stored rows, tables, verdicts and plots.

``--quick`` (the ``quick`` preset) runs on the generated ``gen-keys`` stream only (no public
data, seconds); the ``full`` preset reads T-Drive and Diginetica under the data root (a few
minutes; ``nice -n 10`` on a shared machine). ``--out docs/results/open_domain`` refreshes the
run RESULTS.md reads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.bench.open_domain.run import Grid

FIGURES = ("full", "quick")
"""The presets' names (:data:`app.bench.open_domain.run.PRESETS`), here so that ``--help``
imports no numpy."""


def register(kinds: Any) -> None:
    """Add ``open-domain`` to ``dpstream bench``'s verbs."""
    from app.bench.papers import PAPERS, add_common

    p = kinds.add_parser("open-domain", help=PAPERS["open-domain"], description=__doc__)
    add_common(p, FIGURES, Path("out/bench/open-domain"))
    p.set_defaults(func=main)


def grid_of(args: argparse.Namespace) -> Grid:
    """The preset (``--figure``, default ``full``; ``--quick``: ``quick``), with ``--seeds``
    and ``--trials`` applied."""
    from app.bench.open_domain.run import PRESETS

    grid = PRESETS["quick" if args.quick else args.figure or "full"]
    if args.seeds is not None:
        grid = replace(grid, seeds=args.seeds)
    if args.trials is not None:
        grid = replace(grid, trials=args.trials)
    return grid


def _machine() -> str:
    from app.bench.engine import store

    m = store.machine()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{m['platform']}, {m['cpus']} CPUs (load average {load:.1f} at the start), "
        f"Python {m['python']}, numpy {m['numpy']}"
    )


def main(args: argparse.Namespace) -> int:
    from app.bench.engine import store
    from app.bench.engine.datasets import require
    from app.bench.open_domain import data, plots, report, run

    grid = grid_of(args)
    for name in grid.datasets:
        if name != "gen-keys":
            require(name)
    meta: dict[str, Any] = {
        "command": "dpstream bench " + " ".join(sys.argv[sys.argv.index("open-domain") :])
        if "open-domain" in sys.argv
        else "dpstream bench open-domain",
        "commit": store.commit() or "unknown",
        "machine": _machine(),
    }
    began = time.perf_counter()
    cells = len(grid.datasets) * grid.seeds * len(grid.eps) * len(grid.w)
    from tqdm import tqdm

    with tqdm(total=cells, desc="bench open-domain", unit="cell") as bar:

        def tick(cell: str) -> None:
            bar.set_postfix_str(cell)
            bar.update(1)

        rows = run.run(grid, data.load, tick)
    meta["seconds"] = round(time.perf_counter() - began, 1)
    path = report.write(rows, args.out, meta)
    m = report.means(rows)
    pngs = plots.plot(m, args.out)
    for ds in grid.datasets:
        print(f"\n{ds}:\n" + "\n".join(report.table(m, ds)))
    print("\n" + "\n".join(report.verdicts(m)))
    print(f"\nrows: {path}; plots: {', '.join(str(p) for p in pngs)}; {meta['seconds']} s")
    return 0
