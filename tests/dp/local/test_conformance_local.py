"""Every registered local mechanism passes the local conformance checks.

The lead wires ``app.dp.local.checks.yield_local_checks`` into ``tests/dp/test_conformance.py``;
this module runs them meanwhile, one case per (mechanism, check).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.dp import registry
from app.dp.local.checks import yield_local_checks

CASES = [
    pytest.param(name, check, id=f"{name}:{check.__name__.removeprefix('check_')}")
    for name in registry.names("local")
    for check in yield_local_checks()
]


def test_every_local_mechanism_is_registered():
    assert registry.names("local") == ["lbu", "lsp", "lpu", "lbd", "lba", "lpd", "lpa", "plbu"]


@pytest.mark.parametrize(("name", "check"), CASES)
def test_conformance(name, check):
    cls = registry.get(name)
    check(lambda: cls(**cls.test_params()), np.random.default_rng(20240601))
