"""The paper verbs of ``dpstream bench``: their help lines, the module behind each verb that
takes its module's options, and how such a verb's default data falls back to generated sets.

Read by the verbs (:mod:`app.bench.verbs`) and by the stored runs that replay them
(:mod:`app.bench.report.stored`); nothing here is heavy to import.

>>> sorted(PAPERS)
['ldp-ids', 'optstream', 'pldp', 'pwsm', 'wn']
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["MODULES", "MODULE_DATA", "PAPERS", "fall_back"]

PAPERS = {
    "pwsm": "PWSM (Du et al., PVLDB 2025): AMRE against eps, w and the two-group ratio",
    "ldp-ids": "LDP-IDS (Ren et al., SIGMOD 2022): MRE against eps and w, CFPU",
    "pldp": "PLDP-IDS (Du et al.): AMSE against eps and w, ablations",
    "optstream": "OptStream (Fioretto & Van Hentenryck, AAMAS 2018): Figs. 3, 4, 6, 8, 10",
    "wn": "(w,n)-DP (Liu et al. 2021): MAE/MRE against eps, w and n; Table 1",
}
"""The verbs, with their help lines."""


MODULES = {
    "pldp": "app.bench.pldp.runs",
    "optstream": "app.bench.optstream.cli",
    "wn": "app.bench.wn.figs",
}
"""The papers whose verb takes its module's own options (the module is heavy: numpy, scipy,
matplotlib; it is imported when the verb runs, never when the parser is built)."""


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
