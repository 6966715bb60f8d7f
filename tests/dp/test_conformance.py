"""Every registered mechanism passes every check of its kind (``app.dp.checks``)."""

from __future__ import annotations

import numpy as np
import pytest

from app.dp.checks import factory_for, yield_checks
from app.dp.registry import get, names

CASES = [
    pytest.param(name, check, id=f"{name}:{check.__name__.removeprefix('check_')}")
    for name in names()
    for check in yield_checks(get(name).kind)
]


@pytest.mark.parametrize(("name", "check"), CASES)
def test_conformance(name, check):
    check(factory_for(get(name)), np.random.default_rng(20261122))


def test_check_verb_runs_the_suite(capsys):
    from app.cli import main

    assert main(["check", "uniform"]) == 0
    out = capsys.readouterr().out
    assert out.count("ok   uniform:") == len(list(yield_checks("central")))
    assert "0 failure(s)" in out
