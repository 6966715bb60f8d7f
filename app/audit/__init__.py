"""Empirical privacy auditing: lower bounds on every registered mechanism's privacy loss.

The auditor builds neighbouring inputs under each mechanism's own privacy model
(:mod:`~app.audit.pairs`), runs many independent trials of the real mechanism class
(:mod:`~app.audit.runners`), summarizes each run (:mod:`~app.audit.features`), searches a
distinguishing event on half of the runs and certifies it on the other half
(:mod:`~app.audit.events`) with exact Clopper-Pearson bounds (:mod:`~app.audit.bounds`), and
judges the bound against the claimed ``eps`` (:mod:`~app.audit.verdict`); worst-case cases
(:mod:`~app.audit.tight`) claim the computed loss of a pair that realizes it. Deliberately broken
mechanisms (:mod:`~app.audit.controls`, never registered) check that the auditor has the power
to catch real bugs. ``dpstream audit`` (:mod:`~app.audit.cli`) runs it all
(:mod:`~app.audit.run`) and prints the table (:mod:`~app.audit.report`).

A lower bound at or below the claim is *not* a proof of privacy: it says this auditor, with this
many trials, found no event violating the claim. A bound above the claim is a proof (at the
stated confidence) that the implementation is not ``eps``-DP for that pair.

The names below load on first use (PEP 562), so registering the ``audit`` verb imports no
SciPy and ``dpstream --help`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ADAPTERS", "QUICK", "Settings", "Verdict", "run_audit"]

_HOMES = {
    "ADAPTERS": "app.audit.runners",
    "QUICK": "app.audit.runners",
    "Settings": "app.audit.runners",
    "Verdict": "app.audit.verdict",
    "run_audit": "app.audit.run",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
