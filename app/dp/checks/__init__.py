"""The conformance suite: the checks every registered mechanism must pass.

- :mod:`app.dp.checks.core`: the checks, written once against an :class:`Adapter` (what a
  slot's input is for one kind of mechanism, how a slot runs, which windows must hold);
- each family's adapter, in its family: :mod:`app.dp.central.checks`,
  :mod:`app.dp.local.checks`, :mod:`app.dp.wn.checks` (kind ``graph``) and
  :mod:`app.dp.period.checks`;
- :mod:`app.dp.checks.suite`: the checks bound to each kind's adapter
  (:func:`~app.dp.checks.suite.yield_checks`), above the families so that none imports another
  in a loop.

No pytest: ``tests/dp/test_conformance.py`` runs one case per (mechanism, check), and
``dpstream check`` runs the same checks on a deployed image.
"""

from __future__ import annotations

from app.dp.checks.core import (
    CHECKS,
    Adapter,
    Check,
    Factory,
    ReleasesAtOnce,
    Trace,
    factory_for,
    run,
    same,
    same_releases,
    through_msgpack,
)

__all__ = [
    "CHECKS",
    "Adapter",
    "Check",
    "Factory",
    "ReleasesAtOnce",
    "Trace",
    "factory_for",
    "run",
    "same",
    "same_releases",
    "through_msgpack",
]
