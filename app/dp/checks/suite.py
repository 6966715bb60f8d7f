"""The conformance suite: every check of :mod:`app.dp.checks`, bound to each kind's adapter.

It sits above the checks and the adapters of the families (:mod:`app.dp.central.checks`,
:mod:`app.dp.local.checks`, (w,n) in :mod:`app.dp.wn.checks`, :mod:`app.dp.period.checks`),
so that none of them imports another in a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from app.dp.central.checks import CENTRAL
from app.dp.checks import CHECKS, Adapter, Check, Factory
from app.dp.local.checks import LOCAL
from app.dp.period.checks import PERIOD
from app.dp.wn.checks import GRAPH

ADAPTERS: dict[str, Adapter] = {
    "central": CENTRAL,
    "local": LOCAL,
    "graph": GRAPH,
    "period": PERIOD,
}
"""``Mechanism.kind`` -> its adapter."""


def adapter(kind: str) -> Adapter:
    """The adapter of mechanisms of ``kind`` (``Mechanism.kind``)."""
    try:
        return ADAPTERS[kind]
    except KeyError:
        raise ValueError(f"no checks for kind {kind!r}") from None


def yield_checks(kind: str) -> Iterator[Check]:
    """Every check, bound to the adapter of ``kind``: ``check(factory, rng)``."""
    bound_to = adapter(kind)
    for check in CHECKS:
        yield _bind(check, bound_to)


def _bind(check: Callable[[Adapter, Factory, np.random.Generator], None], a: Adapter) -> Check:
    def bound(factory: Factory, rng: np.random.Generator) -> None:
        check(a, factory, rng)

    bound.__name__ = bound.__qualname__ = check.__name__
    bound.__doc__ = check.__doc__
    return bound
