"""The paper verbs of ``dpstream bench``: their help lines, the options every one of them takes
(:func:`add_common`), the module behind each verb that takes its module's options, and how such
a verb's default data falls back to generated sets.

Read by the verbs (:mod:`app.bench.verbs`) and by the stored runs that replay them
(:mod:`app.bench.report.stored`); nothing here is heavy to import.

>>> sorted(PAPERS)
['ldp-ids', 'open-domain', 'optstream', 'pldp', 'pwsm', 'wn']
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "COMMON",
    "MODULES",
    "MODULE_DATA",
    "PAPERS",
    "TAKES",
    "add_common",
    "fall_back",
    "module_parser",
    "refused",
]

PAPERS = {
    "pwsm": "PWSM (Du et al., PVLDB 2025): AMRE against eps, w and the two-group ratio",
    "ldp-ids": "LDP-IDS (Ren et al., SIGMOD 2022): MRE against eps and w, CFPU",
    "pldp": "PLDP-IDS (Du et al.): AMSE against eps and w, ablations",
    "optstream": "OptStream (Fioretto & Van Hentenryck, AAMAS 2018): Figs. 3, 4, 6, 8, 10",
    "wn": "(w,n)-DP (Liu et al. 2021): MAE/MRE against eps, w and n; Table 1",
    "open-domain": "open-domain mechanisms (issue 36) against the known key set and per-slot "
    "thresholding",
}
"""The verbs, with their help lines."""


COMMON = {
    "figure": "one preset of the paper (a figure; default: the paper's default set)",
    "quick": "the presets' reduced grids (minutes)",
    "out": "output folder (default: %(default)s; None: print, write nothing)",
    "seeds": "seeds 0..n-1 (default: the preset's)",
    "trials": "noise trials per seed (default: the preset's)",
}
"""The options of every paper verb (``--figure``, alias ``--preset``), with their help lines."""


TAKES = {
    "pwsm": ("seeds",),
    "ldp-ids": ("seeds",),
    "pldp": ("seeds",),
    "optstream": ("trials",),
    "wn": ("seeds",),
    "open-domain": ("seeds", "trials"),
}
"""Which of ``--seeds`` and ``--trials`` mean something to each paper: the grids of pwsm,
ldp-ids, pldp and wn draw one noise run per seed of their data; OptStream's data is fixed, its
trials are noise draws; open-domain bounds each seed's users and draws noise trials on each."""


def add_common(parser: argparse.ArgumentParser, figures: Sequence[str], out: Path | None) -> None:
    """Add the options of :data:`COMMON` to a paper verb's ``parser`` (before its own):
    ``figures`` are the ``--figure`` choices, ``out`` the default output folder (``None``:
    print only). ``--seeds`` and ``--trials`` default to ``None`` (the preset's)."""
    parser.add_argument(
        "--figure", "--preset", dest="figure", choices=list(figures), help=COMMON["figure"]
    )
    parser.add_argument("--quick", action="store_true", help=COMMON["quick"])
    parser.add_argument("--out", type=Path, default=out, metavar="DIR", help=COMMON["out"])
    parser.add_argument("--seeds", type=int, metavar="N", help=COMMON["seeds"])
    parser.add_argument("--trials", type=int, metavar="N", help=COMMON["trials"])


def refused(paper: str, options: argparse.Namespace) -> int:
    """2, with one line on stderr, if ``options`` give ``--seeds`` or ``--trials`` to a paper
    where it means nothing (:data:`TAKES`); else 0.

    >>> refused("pwsm", argparse.Namespace(seeds=2, trials=None))
    0
    """
    given = [k for k in ("seeds", "trials") if getattr(options, k) is not None]
    if wrong := [k for k in given if k not in TAKES[paper]]:
        takes = " and ".join(f"--{k}" for k in TAKES[paper])
        print(
            f"dpstream bench {paper}: --{wrong[0]} has no meaning here (it takes {takes})",
            file=sys.stderr,
        )
        return 2
    return 0


MODULES = {
    "pldp": "app.bench.pldp.runs",
    "optstream": "app.bench.optstream.cli",
    "wn": "app.bench.wn.figs",
}
"""The papers whose verb takes its module's own options (the module is heavy: numpy, scipy,
matplotlib; it is imported when the verb runs, never when the parser is built)."""


def module_parser(paper: str) -> tuple[Any, argparse.ArgumentParser]:
    """The module of a module verb (:data:`MODULES`) and its parser: the common options, then
    the module's own (its ``add_arguments``); ``FIGURES`` and ``OUT`` give the ``--figure``
    choices and the default output folder."""
    module = importlib.import_module(MODULES[paper])
    parser = argparse.ArgumentParser(prog=f"dpstream bench {paper}", description=PAPERS[paper])
    add_common(parser, module.FIGURES, module.OUT)
    module.add_arguments(parser)
    return module, parser


MODULE_DATA = {"pldp": ("datasets", False), "optstream": ("data", False), "wn": ("data", True)}
"""Each module verb's dataset option: its ``dest`` and whether it is comma-separated (else a
list). A module's ``STAND_INS`` (public set -> generated set), if it has one, names what runs
in place of a missing default set (``wn``: :data:`app.bench.wn.generated.STAND_INS`)."""


def fall_back(
    paper: str, module: Any, parser: argparse.ArgumentParser, options: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """A module verb's data sets, and the missing public sets it skips; sets ``options``.

    Only the default data option falls back (a set asked for by name is the caller's to
    :func:`~app.bench.engine.datasets.require`): each missing set gives way to the module's
    generated stand-in, if its ``STAND_INS`` names one, else is dropped."""
    from app.bench.engine.datasets import missing

    dest, comma = MODULE_DATA[paper]
    chosen = getattr(options, dest)
    names = chosen.split(",") if comma else list(chosen)
    skipped = [n for n in names if missing(n)] if chosen == parser.get_default(dest) else []
    if skipped:
        stand_ins = getattr(module, "STAND_INS", {})
        extra = [stand_ins[n] for n in skipped if n in stand_ins]
        names = list(dict.fromkeys([n for n in names if n not in skipped] + extra))
    setattr(options, dest, ",".join(names) if comma else names)
    return names, skipped
