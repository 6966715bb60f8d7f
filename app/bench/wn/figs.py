"""The (w,n) paper's Figs. 8-10 as presets on the stand-in data: eps, w and n sweeps of BD,
STBD, STR and RescueDP (MAE and MRE of Eq. 19, the MRE floor 0.1% of a slot's true total);
every sweep adds RescueDP with its dynamic grouping (``rescuedp_g``, spec A7) and the n sweep
(fig10) the publish-every-timestamp contrast ``wn_uniform`` (Uniform on the (w,n) ledger, T4).

``dpstream bench wn [--quick] [--figure F] [--data msnbc,tdrive,diginetica] [--out DIR]``
(``--data gen-clicks,gen-taxis``: the generated stand-ins, which run in place of the missing
public sets by default) writes ``trajectory.csv`` (one row per dataset, sweep point and
mechanism, with the seeds and parameters), one PNG per dataset, figure and measure, and prints
the orderings at the papers' defaults (eps = 1, w = 120, n = 6). ``--quick`` is the
shared-machine profile: the first 192 slots, three points per sweep, one seed. Mechanisms come
from the registry (:func:`app.bench.wn.trajectory.run_one`).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from app.bench.engine.plots import plot_sweep
from app.bench.wn.data import diginetica, tdrive
from app.bench.wn.generated import GENERATED
from app.bench.wn.generated import STAND_INS as STAND_INS  # the verb's fallback
from app.bench.wn.trajectory import CONTRASTS, MECHANISMS, Trajectories, load, sweep

DEFAULTS = {"eps": 1.0, "w": 120.0, "n": 6.0}
"""The paper's defaults (Table 2)."""
PRESETS: dict[str, tuple[str, list[float]]] = {
    "fig8": ("eps", [0.2, 0.4, 0.6, 0.8, 1.0]),
    "fig9": ("w", [40.0, 80.0, 120.0, 160.0, 200.0]),
    "fig10": ("n", [4.0, 5.0, 6.0, 7.0, 8.0, 9.0]),
}
QUICK: dict[str, list[float]] = {
    "eps": [0.2, 0.6, 1.0],
    "w": [40.0, 120.0, 200.0],
    "n": [4.0, 6.0, 9.0],
}
QUICK_SLOTS = 192
LOADERS: dict[str, Callable[[int], Trajectories]] = {
    "msnbc": lambda cap: load(slots=768, cap=cap),
    "tdrive": lambda cap: tdrive(cap=cap),
    "diginetica": lambda cap: diginetica(cap=cap),
    **GENERATED,
}
"""Dataset loaders, each clipping every user to its first ``cap`` (the paper's ``l``) distinct
values a slot; ``gen-clicks`` and ``gen-taxis`` are generated
(:mod:`app.bench.wn.generated`) and run in place of a missing public set
(:data:`STAND_INS`)."""


def truncated(data: Trajectories, slots: int) -> Trajectories:
    """The first ``slots`` slots of ``data`` (the rest unchanged)."""
    return Trajectories(
        data.counts[:slots],
        data.graph,
        data.page_groups,
        data.process_var,
        data.clipped_share,
        data.slot_users,
    )


def run(
    name: str,
    data: Trajectories,
    quick: bool,
    seeds: int,
    cap: int,
    figures: Sequence[str] = tuple(PRESETS),
) -> list[dict[str, Any]]:
    """The sweeps of ``figures`` on one dataset; rows carry dataset, figure and parameters."""
    rows = []
    for fig in tqdm(figures, desc=name, unit="figure"):
        axis, values = PRESETS[fig]
        grid = QUICK[axis] if quick else values
        for r in sweep(data, axis, grid, DEFAULTS, cap, seeds, figure_mechanisms(axis)):
            params = {**DEFAULTS, axis: r["value"]}
            rows.append(
                {
                    "dataset": name,
                    "figure": fig,
                    **r,
                    **params,
                    "l": cap,
                    "slots": len(data.counts),
                    "seeds_used": f"0..{seeds - 1}",
                }
            )
    return rows


def figure_mechanisms(axis: str) -> tuple[str, ...]:
    """The mechanisms of a sweep: the paper's four, then the axis's contrasts (RescueDP with
    dynamic grouping; in the n sweep also the publish-every-timestamp Uniform).

    >>> figure_mechanisms("n")
    ('bd', 'stbd', 'str', 'rescuedp', 'rescuedp_g', 'wn_uniform')
    """
    return MECHANISMS + CONTRASTS.get(axis, ())


def ordering(rows: Sequence[dict[str, Any]], measure: str) -> list[tuple[str, float]]:
    """Mechanisms from best to worst by mean ``measure`` over the rows at the defaults."""
    at = [r for r in rows if all(float(r[k]) == v for k, v in DEFAULTS.items())]
    means = {
        m: float(np.mean([float(r[measure]) for r in at if r["mechanism"] == m]))
        for m in MECHANISMS
    }
    return sorted(means.items(), key=lambda kv: kv[1])


def plots(rows: Sequence[dict[str, Any]], out: Path, name: str) -> list[Path]:
    """One PNG per figure and measure for dataset ``name``."""
    paths = []
    for fig, (axis, _) in PRESETS.items():
        sub = [{**r, axis: r["value"]} for r in rows if r["figure"] == fig]
        if not sub:
            continue
        for measure in ("mae", "mre"):
            paths.append(
                plot_sweep(
                    sub,
                    out / f"trajectory-{name}-{fig}-{measure}.png",
                    x=axis,
                    measure=measure,
                    title=f"{name}: {measure.upper()} vs {axis} ({fig} of Liu et al. 2021)",
                    footer=f"others at eps=1, w=120, n=6; l={sub[0]['l']}; T={sub[0]['slots']}; "
                    f"seeds {sub[0]['seeds_used']}",
                    mechanisms=figure_mechanisms(axis),
                )
            )
    return paths


FIGURES = (*PRESETS, "table1")
"""``--figure``: one figure (default fig8, fig9 and fig10); table1: the spatial ranges of
Table 1. ``--quick``: 192 slots, 3 points a sweep, 1 seed (default 3)."""
OUT = Path("bench-out/trajectory")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``dpstream bench wn`` beside the common ones
    (:func:`app.bench.papers.add_common`)."""
    ap.add_argument(
        "--data",
        default="msnbc,tdrive,diginetica",
        help=f"comma-separated, of {', '.join(LOADERS)} (a missing public set: its generated "
        "stand-in)",
    )
    ap.add_argument("--slots", type=int, help="the first T slots of each dataset (default all)")
    ap.add_argument("--l", dest="cap", type=int, default=5, help="distinct values kept per user")


def run_cli(args: argparse.Namespace) -> int:
    """Run the figures ``args`` ask for; print the orderings, write CSV and PNGs to ``--out``."""
    if args.figure == "table1":
        from app.bench.wn import spatial_range as trajectory_range

        public = [n for n in args.data.split(",") if n in trajectory_range.LOADERS]
        if not public:
            names = ", ".join(trajectory_range.LOADERS)
            print(
                f"dpstream bench wn: table1 measures the public sets ({names}) only",
                file=sys.stderr,
            )
            return 2
        return trajectory_range.print_tables(public)
    figures = [args.figure] if args.figure else list(PRESETS)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = args.seeds if args.seeds is not None else 1 if args.quick else 3
    rows: list[dict[str, Any]] = []
    for name in args.data.split(","):
        started = time.perf_counter()
        data = LOADERS[name](args.cap)
        if args.quick or args.slots:
            data = truncated(data, args.slots or QUICK_SLOTS)
        g = data.graph
        print(
            f"{name}: T={len(data.counts)}, d={g.nodes}, {g.edge_count} edges, "
            f"clipped {100 * data.clipped_share:.2f}% of visits (l={args.cap})"
        )
        mine = run(name, data, args.quick, seeds, args.cap, figures)
        rows += mine
        plots(mine, args.out, name)
        for measure in ("mae", "mre") if "fig8" in figures else ():  # fig8 holds the defaults
            order = " < ".join(f"{m} {v:.4g}" for m, v in ordering(mine, measure))
            print(f"  {measure.upper()} at eps=1, w=120, n=6: {order}")
        print(f"  {time.perf_counter() - started:.0f} s")
    with (args.out / "trajectory.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return 0
