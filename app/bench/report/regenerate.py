"""``dpstream bench results``: run (or reuse) every run, run the cost benchmark if missing,
copy the figures next to the report, check the claims and write RESULTS.md.

Only the sections the report renders are rewritten; hand-written ``## `` sections of the old file
(the (w,n)-DP and OptStream ones) are kept where they were (:mod:`app.bench.report.sections`),
and the header's ``Summary:`` line counts the verdicts of every paper, kept sections included.
Hand edits *inside* a rendered section are lost."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.bench.report.claims import claims
from app.bench.report.evidence import population, zero_release_amre
from app.bench.report.render import closing_note, cost_section, render
from app.bench.report.runs import RUNS, Done, recorded_machine, run_all
from app.bench.report.sections import keep_foreign, with_summary

__all__ = ["copy_figures", "regenerate"]


def copy_figures(out_root: Path, figures: Path, done: Done, cost_dir: Path) -> None:
    """Copy each run's main figure (its preset's measure; CFPU sweeps stay in ``out_root``)
    and the cost plots into ``figures``."""
    for (name, ds), (p, _, _) in done.items():
        dst = figures / f"{name}-{ds}"
        dst.mkdir(parents=True, exist_ok=True)
        for png in (out_root / f"{name}-{ds}").glob(f"{p.measure}*.png"):
            shutil.copy(png, dst / png.name)
    for png in (cost_dir / f"cost_{axis}.png" for axis in ("d", "m", "N")):
        if png.exists():
            (figures / "cost").mkdir(parents=True, exist_ok=True)
            shutil.copy(png, figures / "cost" / png.name)


def _ensure_cost(cost: Path, quick: bool) -> None:
    """Run ``dpstream bench cost`` into ``cost`` unless its slopes are there."""
    from app.bench.cost import step_times, tdrive_replay

    if (cost / "cost_slopes.csv").exists():
        return
    if quick:
        step_times(cost, d_values=(10, 100, 1000), m_values=(1, 10), n_values=(1000, 10_000))
    else:
        step_times(cost)
        tdrive_replay(cost)


def _facts(done: Done) -> tuple[dict[str, float], dict[str, int]]:
    """Data facts the explanations quote: Taxi's all-zero AMRE, the ratio runs' users."""
    floors = {
        ds: zero_release_amre(p)
        for (_, ds), (p, _, _) in done.items()
        if ds == "tdrive" and p.kind == "central"
    }
    populations = {ds: population(p) for (_, ds), (p, _, _) in done.items() if p.sweep == "ratio"}
    return floors, populations


def regenerate(
    write: str | Path,
    out_root: str | Path,
    figures: str | Path,
    cost_dir: str | Path,
    *,
    quick: bool = False,
    reuse: bool = False,
    jobs: int | None = None,
    runs: Sequence[tuple[str, str]] = RUNS,
    runner: Callable[..., Any] = run_all,
) -> Path:
    """Run (or reuse) every run, run the cost benchmark if missing, write the report."""
    began = time.perf_counter()
    done: Done = runner(out_root, quick=quick, reuse=reuse, jobs=jobs, runs=runs)
    cost = Path(cost_dir)
    _ensure_cost(cost, quick)
    path = Path(write)
    link_root = path.resolve().parent
    figs = Path(figures) if Path(figures).is_absolute() else link_root / figures
    copy_figures(Path(out_root), figs, done, cost)
    walls = [w for _, _, w in done.values() if not math.isnan(w)]
    total = sum(walls) if reuse else time.perf_counter() - began
    machine = recorded_machine(out_root)
    floors, populations = _facts(done)
    text = render(
        done,
        claims(done, floors, populations),
        figures=figs,
        link_root=link_root,
        cost_lines=cost_section(cost, figs / "cost", link_root, machine),
        closing=closing_note(cost, total, quick),
        command="dpstream bench results" + (" --quick" if quick else ""),
        total_s=total,
        machine=machine,
    )
    old = path.read_text() if path.exists() else ""
    path.write_text(with_summary(keep_foreign(old, text)))
    return path
