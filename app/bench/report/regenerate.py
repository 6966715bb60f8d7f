"""``dpstream bench results``: run (or reuse) every run, run the cost benchmark if missing,
copy the figures next to the report, check the claims and write RESULTS.md whole.

The preset grid (PWSM, LDP-IDS) runs into ``out_root`` (:mod:`app.bench.engine.runs`); the
other papers' verbs (PLDP-IDS, (w,n)-DP, OptStream) keep their stored runs in the figures
folder beside their PNGs (:mod:`.stored`; ``--quick`` runs them into ``out_root/quick-stored``
instead), and the claims that are deterministic checks run their tests (:mod:`.checks`). Every
section is rendered: nothing of the old file survives, so a hand edit belongs in the code that
renders it."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.bench.engine.claims import Claim
from app.bench.engine.evidence import population, zero_release_amre
from app.bench.engine.runs import RUNS, Done, recorded_machines, run_all
from app.bench.engine.store import Produced, find, gzip_file, record, records, write_records
from app.bench.open_domain.report import section as open_domain_section
from app.bench.optstream import section as optstream
from app.bench.pldp import section as pldp
from app.bench.report.checks import run_checks
from app.bench.report.claims import claims
from app.bench.report.render import closing_note, cost_section, render
from app.bench.report.stored import ensure
from app.bench.wn import section as wn

__all__ = ["copy_figures", "regenerate"]


def copy_figures(out_root: Path, figures: Path, done: Done, cost_dir: Path) -> None:
    """Copy each run's main figure (its preset's measure; CFPU sweeps stay in ``out_root``)
    and the cost plots into ``figures`` (nothing to copy where they are the same folder)."""
    for (name, ds), (p, _, _) in done.items():
        src, dst = out_root / f"{name}-{ds}", figures / f"{name}-{ds}"
        if src.resolve() == dst.resolve():
            continue
        dst.mkdir(parents=True, exist_ok=True)
        for png in src.glob(f"{p.measure}*.png"):
            shutil.copy(png, dst / png.name)
    if cost_dir.resolve() == (figures / "cost").resolve():
        return
    for png in (cost_dir / f"cost_{axis}.png" for axis in ("d", "m", "N")):
        if png.exists():
            (figures / "cost").mkdir(parents=True, exist_ok=True)
            shutil.copy(png, figures / "cost" / png.name)


COST_FILES = ("cost_steps.csv", "cost_slopes.csv", "tdrive_replay.csv")


def _ensure_cost(cost: Path, quick: bool, store: Path) -> None:
    """Run ``dpstream bench cost`` into ``cost`` unless its slopes are there; keep its CSVs
    gzipped and record the run as ``cost`` in the run store at ``store``."""
    from app.bench.engine.cost import step_times, tdrive_replay

    if find(cost / "cost_slopes.csv"):
        return
    began = time.perf_counter()
    if quick:
        step_times(cost, d_values=(10, 100, 1000), m_values=(1, 10), n_values=(1000, 10_000))
    else:
        step_times(cost)
        tdrive_replay(cost)
    for name in COST_FILES:
        if (cost / name).exists():
            gzip_file(cost / name)
    wall = round(time.perf_counter() - began, 1)
    command = f"dpstream bench cost{' --quick' if quick else ''} --out {cost}"
    record(store, "cost", command=command, wall_s=wall)


def _facts(done: Done, store: Path) -> tuple[dict[str, float], dict[str, int]]:
    """Data facts the explanations quote: Taxi's all-zero AMRE, the ratio runs' users; read
    from the runs' records, measured (and recorded) where a record lacks them."""
    log = records(store)
    floors: dict[str, float] = {}
    populations: dict[str, int] = {}
    for (name, ds), (p, _, _) in done.items():
        key = f"{name}-{ds}"
        facts = dict(log.get(key, {}).get("facts", {}))
        if ds == "tdrive" and p.kind == "central":
            if "zero_amre" not in facts:
                facts["zero_amre"] = zero_release_amre(p)
            floors[ds] = float(facts["zero_amre"])
        if p.sweep == "ratio":
            if "users" not in facts:
                facts["users"] = population(p)
            populations[ds] = int(facts["users"])
        if facts and facts != log.get(key, {}).get("facts"):
            log[key] = {**log.get(key, {}), "facts": facts}
            write_records(store, log)
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
    stored: Callable[..., dict[str, Produced]] = ensure,
    checks: Callable[[], dict[str, bool | None]] | None = None,
    absent: Sequence[str] = (),
) -> Path:
    """Run (or reuse) every run, run the cost benchmark if missing, write the report.

    ``runner`` runs the preset grid, ``stored`` the other papers' stored runs (in the figures
    folder) and ``checks`` the tests behind the deterministic claims; tests pass stubs.
    ``absent`` names the public data sets that were missing (the caller left their runs out):
    the closing note says so."""
    began = time.perf_counter()
    done: Done = runner(out_root, quick=quick, reuse=reuse, jobs=jobs, runs=runs)
    cost = Path(cost_dir)
    _ensure_cost(cost, quick, Path(out_root))
    path = Path(write)
    link_root = path.resolve().parent
    figs = Path(figures) if Path(figures).is_absolute() else link_root / figures
    copy_figures(Path(out_root), figs, done, cost)
    # quick runs never replace the stored full ones beside the figures
    stored_root = Path(out_root) / "quick-stored" if quick else figs
    produced = stored(stored_root, reuse=reuse, quick=quick)
    passed = (checks or run_checks)()
    walls = [w for _, _, w in done.values() if not math.isnan(w)]
    walls += [p.wall_s for p in produced.values() if not math.isnan(p.wall_s)]
    total = sum(walls) if reuse else time.perf_counter() - began
    machines = recorded_machines(out_root, [f"{name}-{ds}" for name, ds in done])
    machine = machines[0][0] if len(machines) == 1 else None  # else the cost run names its own
    floors, populations = _facts(done, Path(out_root))
    others: list[tuple[list[Claim], list[str]]] = [
        pldp.section(produced, link_root),
        wn.section(produced, link_root, passed.get("wn_invariants")),
        optstream.section(produced, link_root, passed.get("theorem12")),
    ]
    text = render(
        done,
        claims(done, floors, populations) + [c for items, _ in others for c in items],
        figures=figs,
        link_root=link_root,
        cost_lines=cost_section(cost, figs / "cost", link_root, machine),
        closing=closing_note(cost, total, quick, absent),
        command="dpstream bench results" + (" --quick" if quick else ""),
        total_s=total,
        machines=machines,
        sections=[
            *(lines for _, lines in others),
            open_domain_section(figs / "open_domain", link_root),
        ],
    )
    path.write_text(text)
    return path
