"""``dpstream bench <paper>``: one verb per paper, each running that paper's figure presets.

=========== ======================================= =================================
verb        what it runs                            ``--figure`` (default: all of them)
=========== ======================================= =================================
pwsm        PWSM Figs. 10-13 (central, the grid)    eps, w, ratio-eps, ratio-w
ldp-ids     LDP-IDS Figs. 4-5, Table 2 (local)      eps, w, cfpu
pldp        PLDP-IDS Figs. 2-5 (personal local)     eps, w (the sweeps)
optstream   OptStream Figs. 3, 4, 6, 8, 10, Thm 11  3, 4, 6, 8, 10, thm11, visuals
wn          (w,n)-DP Figs. 8-10, Table 1            fig8, fig9, fig10, table1
open-domain open-domain mechanisms (issue 36)       quick, full (default full)
=========== ======================================= =================================

Every verb takes the options of :func:`app.bench.papers.add_common` first, with one meaning:
``--figure`` (alias ``--preset``), ``--quick`` (the reduced grids, minutes), ``--out`` (the
output folder), ``--seeds N`` and ``--trials N`` (override the preset's; a paper where one of
them means nothing, :data:`app.bench.papers.TAKES`, refuses it in one line, exit 2); its own
options come after. Every verb draws progress bars on stderr. ``pwsm`` and ``ldp-ids`` run the
presets of :mod:`app.bench.engine.presets` through :func:`app.bench.engine.runs.run_all`, the
same runs that ``dpstream bench results`` reads (so ``--out out/results`` feeds ``results
--reuse``); ``pldp``, ``optstream`` and ``wn`` run their paper's module
(:mod:`app.bench.pldp.runs`, :mod:`app.bench.optstream.cli`, :mod:`app.bench.wn.figs`), whose
own options they take after the common ones; ``results`` reads their stored runs from
``docs/results`` (the folders and options of :data:`app.bench.report.stored.STORED`), so a
rerun with ``--out docs/results/<folder>`` feeds ``results --reuse`` too.

>>> [f for f in grid_figures("pwsm")]
['eps', 'ratio-eps', 'ratio-w', 'w']
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.bench.papers import MODULES, PAPERS, add_common, fall_back, module_parser, refused

__all__ = ["grid_figures", "register"]


def grid_figures(paper: str) -> list[str]:
    """The preset suffixes of ``paper`` (``pwsm`` or ``ldp-ids``): ``pwsm-eps`` -> ``eps``."""
    from app.bench.engine.presets import names

    return [n.removeprefix(paper + "-") for n in names() if n.startswith(paper + "-")]


def register(kinds: Any) -> None:
    """Add one verb per paper to ``dpstream bench``'s kinds."""
    for paper in ("pwsm", "ldp-ids"):
        p = kinds.add_parser(paper, help=PAPERS[paper], description=PAPERS[paper])
        add_common(p, grid_figures(paper), Path("out/results"))
        p.add_argument("--dataset", help="one dataset (default: each of the paper's)")
        p.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
        p.set_defaults(func=_grid_paper, paper=paper)
    for paper in MODULES:
        p = kinds.add_parser(paper, help=PAPERS[paper], add_help=False)
        p.set_defaults(func=_module_paper, paper=paper, takes_rest=True)
    from app.bench.open_domain.cli import register as register_open_domain

    register_open_domain(kinds)


def _module_paper(args: argparse.Namespace) -> int:
    """``dpstream bench pldp | optstream | wn``: the module's own parser reads the options
    (``args.rest``, ``-h`` included) and its ``run_cli`` runs them."""
    from app.bench.engine.datasets import missing_line, require

    module, parser = module_parser(args.paper)
    options = parser.parse_args(args.rest)
    if refused(args.paper, options):
        return 2
    names, skipped = fall_back(args.paper, module, parser, options)
    if skipped and not names:
        print(
            f"dpstream bench {args.paper}: {missing_line(skipped)}; its figures need one",
            file=sys.stderr,
        )
        return 2
    if skipped:
        print(_fallback(args.paper, skipped, f"on {', '.join(names)}"), file=sys.stderr)
    for name in names:
        require(name)  # asked for by name: one line if it is not there
    return int(module.run_cli(options))


def _fallback(paper: str, skipped: list[str], instead: str) -> str:
    from app.bench.engine.datasets import fallback_note

    return fallback_note(f"bench {paper}", skipped, instead)


def _grid_paper(args: argparse.Namespace) -> int:
    """``dpstream bench pwsm`` / ``ldp-ids``: the paper's presets on its datasets."""
    from app.bench.engine.datasets import missing, require
    from app.bench.engine.runs import RUNS, run_all

    if refused(args.paper, args):
        return 2
    prefix = args.paper + "-"
    runs = [
        (name, ds)
        for name, ds in RUNS
        if name.startswith(prefix)
        and (args.figure is None or name == prefix + args.figure)
        and (args.dataset is None or ds == args.dataset)
    ]
    if not runs:  # a run that does not exist, whatever data the machine holds
        print(
            f"dpstream bench {args.paper}: no run of figure {args.figure or 'any'} on dataset "
            f"{args.dataset!r}; the runs: {', '.join(f'{n} on {d}' for n, d in RUNS)}",
            file=sys.stderr,
        )
        return 2
    if args.dataset is not None:
        require(args.dataset)  # asked for by name: one line if it is not there
    if skipped := sorted({ds for _, ds in runs if missing(ds)}):
        runs = [(name, ds) for name, ds in runs if not missing(ds)]
        print(_fallback(args.paper, skipped, "the runs on generated data"), file=sys.stderr)
    done = run_all(args.out, quick=args.quick, jobs=args.jobs, runs=runs, seeds=args.seeds)
    for (name, ds), (_, rows, wall) in done.items():
        print(f"{name} on {ds}: {len(rows)} rows, {wall:.0f} s -> {args.out / f'{name}-{ds}'}")
    return 0
