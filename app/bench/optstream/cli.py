"""The command line of the OptStream bench: ``dpstream bench optstream``.

It routes ``--figure`` to what draws it: the grids of :mod:`app.bench.optstream.runs` (Figs. 3, 4,
8, 10, Thm 11), the ARMA forecast of :mod:`app.bench.optstream.forecast` (Fig. 6) and the stream
plots of :mod:`app.bench.optstream.visuals` (Figs. 2, 7, 9, 11). Those two use the grids' data
and mechanisms, so the routing lives here, above all three (no import circle).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.bench.optstream import runs as optstream

DEFAULT_DATA = ["rte2013", "synthetic"]
FIGURES = ("3", "4", "6", "8", "10", "thm11", "visuals")
"""``--figure`` choices: the paper's Figs. 3 (eps sweep, default), 4 (hierarchy), 6 (ARMA
forecast), 8 (ablations), 10 (alpha sums 10, 50, 100), Thm 11 (H9, ES error against k) and the
visual Figs. 2, 7, 9, 11 (:mod:`app.bench.optstream.visuals`). ``--trials`` are the noise draws
(seeds 0..n-1; default 3, ``--quick`` 2)."""
OUT = None
"""No default ``--out``: print the table only."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``dpstream bench optstream`` beside the common ones
    (:func:`app.bench.papers.add_common`)."""
    parser.add_argument(
        "--aligned",
        action="store_true",
        help="run every column with the paper's aligned periods (eps per period; not w-event "
        "private: a window straddling two periods loses up to 2 eps)",
    )
    parser.add_argument(
        "--eps", type=float, nargs="+", default=None, help="default 1 0.1 0.01 (Fig. 6: 0.1)"
    )
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
        help="only the headline (private) columns: no aligned-period, ES-thirds or "
        "paper-calibration columns",
    )
    parser.add_argument("--synthetic-days", type=int, default=28)
    parser.add_argument(
        "--data",
        nargs="+",
        choices=list(optstream.DATASETS),
        default=DEFAULT_DATA,
        help="Fig. 6 and the visuals read rte2013 only",
    )
    parser.add_argument(
        "--from-csv",
        type=Path,
        help="re-render a stored run's optstream.csv(.gz) (table, and the figure into --out); "
        "give the same --figure",
    )


TAKES: dict[str, tuple[str, ...]] = {
    "6": ("trials", "quick", "aligned", "eps", "no_extras", "data", "out"),
    "visuals": ("out", "data"),
    "thm11": ("trials", "quick"),
}
"""The options of the figures that are not a grid of :mod:`app.bench.optstream.runs` (every other
figure takes them all); any other option given to them is refused, not ignored."""
UNSET: dict[str, Any] = {
    "trials": None,
    "quick": False,
    "aligned": False,
    "eps": None,
    "alpha": None,
    "ablations": False,
    "hierarchy": False,
    "theorem11": False,
    "k": None,
    "no_extras": False,
    "synthetic_days": 28,
    "data": DEFAULT_DATA,
    "out": None,
    "from_csv": None,
}
"""Each option's value when it is not given."""


def refused(args: argparse.Namespace) -> list[str]:
    """The options given that ``args.figure`` does not take (as ``--name``).

    >>> ns = argparse.Namespace(**{**UNSET, "figure": "6", "k": 4, "aligned": True})
    >>> refused(ns)
    ['--k']
    """
    takes = TAKES.get(args.figure or "")
    if takes is None:
        return []
    given = [k for k, v in UNSET.items() if getattr(args, k) != v and k not in takes]
    if args.figure == "6" and args.eps is not None and len(args.eps) != 1:
        given.append("eps (one value)")
    if args.figure in ("6", "visuals") and args.data not in (DEFAULT_DATA, ["rte2013"]):
        given.append("data (rte2013 only)")
    return ["--" + k.replace("_", "-") for k in given]


def run_cli(args: argparse.Namespace) -> int:
    """Run what ``args`` (of :func:`add_arguments`) ask for; print the table, write ``--out``.
    Return 2, with one line on stderr, when the figure does not take an option given."""
    if args.figure in ("6", "visuals"):
        from app.bench.engine.datasets import require

        require("rte2013")  # both plot the RTE series: one line without it
    bad = refused(args)
    if bad:
        print(
            f"dpstream bench optstream --figure {args.figure} does not take {', '.join(bad)} "
            f"(it takes: {', '.join('--' + k.replace('_', '-') for k in TAKES[args.figure])})",
            file=sys.stderr,
        )
        return 2
    trials = args.trials or (2 if args.quick else 3)
    if args.figure == "6":
        from app.bench.optstream import forecast as optstream_forecast

        return optstream_forecast.write_fig6(
            trials,
            args.out,
            eps=args.eps[0] if args.eps else 0.1,
            aligned=args.aligned,
            extras=not args.no_extras,
        )
    if args.figure == "visuals":
        from app.bench.optstream.visuals import write_all

        for path in write_all(args.out or Path("out/optstream-visuals")):
            print(f"wrote {path}")
        return 0
    args.trials = trials
    args.eps = args.eps or [1.0, 0.1, 0.01]
    args.hierarchy = args.hierarchy or args.figure == "4"
    args.ablations = args.ablations or args.figure == "8"
    args.theorem11 = args.theorem11 or args.figure == "thm11"
    if args.figure == "10" and not args.alpha:
        args.alpha = [10.0, 50.0, 100.0]
    return optstream._run(args)
