"""The local family is registered; ``tests/dp/test_conformance.py`` runs its checks.

``app.dp.checks.suite.yield_checks("local")`` binds every check to the local adapter
(:data:`app.dp.local.checks.LOCAL`), so every name below gets one conformance case per check.
"""

from __future__ import annotations

import inspect

from app.dp import registry
from app.dp.checks.suite import yield_checks


def test_every_local_mechanism_is_registered():
    assert registry.names("local") == [
        "lbu",
        "lsp",
        "lpu",
        "lbd",
        "lba",
        "lpd",
        "lpa",
        "plbu",
        "plpd",
        "plpa",
        "plpd+",
        "plpa+",
        "plbd-rp",
        "plba-rp",
        "plbd-ops",
        "plba-ops",
    ]


def test_local_checks_take_a_factory_and_a_generator():
    for check in yield_checks("local"):
        assert list(inspect.signature(check).parameters) == ["factory", "rng"]
