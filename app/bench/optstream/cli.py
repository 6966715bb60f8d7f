"""The command line of the OptStream bench: ``dpstream bench optstream``.

It routes ``--figure`` to what draws it: the grids of :mod:`app.bench.optstream.runs` (Figs. 3, 4,
8, 10, Thm 11), the ARMA forecast of :mod:`app.bench.optstream.forecast` (Fig. 6) and the stream
plots of :mod:`app.bench.optstream.visuals` (Figs. 2, 7, 9, 11). Those two use the grids' data
and mechanisms, so the routing lives here, above all three (no import circle).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from app.bench.optstream import runs as optstream

FIGURES = ("3", "4", "6", "8", "10", "thm11", "visuals")
"""``--figure`` choices: the paper's Figs. 3, 4, 6 (forecast), 8, 10, Thm 11 (H9) and the
visual Figs. 2, 7, 9, 11 (:mod:`app.bench.optstream.visuals`)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``dpstream bench optstream``."""
    parser.add_argument(
        "--figure",
        choices=FIGURES,
        help="a paper figure's preset: 3 (eps sweep, default), 4 (hierarchy), 6 (ARMA "
        "forecast), 8 (ablations), 10 (alpha sums 10, 50, 100), thm11 (ES error against k), "
        "visuals (the stream plots of Figs. 2, 7, 9, 11)",
    )
    parser.add_argument("--quick", action="store_true", help="2 trials unless --trials is given")
    parser.add_argument("--trials", type=int, default=None, help="seeds 0..n-1 (default 3)")
    parser.add_argument("--strict", action="store_true", help="dpstream's strict periods")
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 0.1, 0.01])
    parser.add_argument(
        "--alpha",
        type=float,
        nargs="*",
        default=None,
        help="(w, alpha) sums: run H6 over these alphas at eps = 1",
    )
    parser.add_argument("--ablations", action="store_true", help="H3: the four ablations")
    parser.add_argument("--hierarchy", action="store_true", help="H4: national and regions")
    parser.add_argument("--theorem11", action="store_true", help="H9: ES error against k")
    parser.add_argument(
        "--k", type=int, default=None, help="k for every run (default 10, 5 at alpha = 100)"
    )
    parser.add_argument(
        "--no-extras",
        action="store_true",
        help="only the headline (private) columns: no ES-thirds, no paper-calibration columns",
    )
    parser.add_argument("--synthetic-days", type=int, default=28)
    parser.add_argument(
        "--data", nargs="+", choices=list(optstream.DATASETS), default=["rte2013", "synthetic"]
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--from-csv",
        type=Path,
        help="re-render a stored run's optstream.csv(.gz) (table, and the figure into --out); "
        "give the same --figure",
    )


def run_cli(args: argparse.Namespace) -> int:
    """Run what ``args`` (of :func:`add_arguments`) ask for; print the table, write ``--out``."""
    trials = args.trials or (2 if args.quick else 3)
    if args.figure in ("6", "visuals"):
        from app.bench.engine.datasets import require

        require("rte2013")  # both plot the RTE series, whatever --data: one line without it
    if args.figure == "6":
        from app.bench.optstream import forecast as optstream_forecast

        return optstream_forecast.write_fig6(trials, args.out)
    if args.figure == "visuals":
        from app.bench.optstream.visuals import write_all

        for path in write_all(args.out or Path("out/optstream-visuals")):
            print(f"wrote {path}")
        return 0
    args.trials = trials
    args.hierarchy = args.hierarchy or args.figure == "4"
    args.ablations = args.ablations or args.figure == "8"
    args.theorem11 = args.theorem11 or args.figure == "thm11"
    if args.figure == "10" and not args.alpha:
        args.alpha = [10.0, 50.0, 100.0]
    return optstream._run(args)
