"""Every registered mechanism passes every conformance check (``app.dp.checks``).

The mechanisms and their kinds come from the registry; the checks are the same for every kind
(each kind brings only its adapter), so one table of (mechanism, check) cases covers them all.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.dp import registry
from app.dp.checks import CHECKS, factory_for
from app.dp.checks.suite import adapter, yield_checks

KINDS = sorted({registry.get(name).kind for name in registry.names()})
CASES = [
    pytest.param(name, check, id=f"{name}:{check.__name__.removeprefix('check_')}")
    for name in registry.names()
    for check in yield_checks(registry.get(name).kind)
]


@pytest.mark.parametrize(("name", "check"), CASES)
def test_conformance(name, check):
    check(factory_for(registry.get(name)), np.random.default_rng(20261122))


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_has_an_adapter_and_runs_every_check(kind):
    """No kind has checks of its own, none skips one."""
    assert adapter(kind) is not None
    assert [c.__name__ for c in yield_checks(kind)] == [c.__name__ for c in CHECKS]
    assert len(registry.names(kind)) >= 1


def test_an_unknown_kind_has_no_checks():
    with pytest.raises(ValueError, match="no checks for kind 'nope'"):
        list(yield_checks("nope"))


def test_every_registered_mechanism_is_enrolled():
    assert sorted({p.values[0] for p in CASES}) == sorted(registry.names())
    assert len(CASES) == len(registry.names()) * len(CHECKS)


def test_check_verb_runs_the_suite(capsys):
    from app.cli import main

    central = registry.names("central")[0]
    assert main(["check", central]) == 0
    out = capsys.readouterr().out
    assert out.count(f"ok   {central}:") == len(CHECKS)
    assert "0 failure(s)" in out


class MutatesInput(registry.get("uniform")):
    """Uniform, but it zeroes the counts it is handed."""

    def step(self, counts, rng, population=None):
        r = super().step(counts, rng, population)
        counts[...] = 0
        return r


class ForgetsState(registry.get(registry.names("period")[0])):
    """A period mechanism that loads nothing."""

    def load_state(self, blob):
        return None


class LocalWithoutDocs(registry.get(registry.names("local")[0])):
    """No sections."""


@pytest.mark.parametrize(
    ("cls", "check", "match"),
    [
        (MutatesInput, "check_input_unchanged", "input 0 changed"),
        (ForgetsState, "check_state_msgpack", "load_state then state_dict differs"),
        (ForgetsState, "check_state_roundtrip", "resuming after slot 1 changed"),
        (LocalWithoutDocs, "check_docstring", "missing docstring sections"),
    ],
)
def test_the_checks_catch_a_broken_mechanism(cls, check, match):
    (bound,) = [c for c in yield_checks(cls.kind) if c.__name__ == check]
    with pytest.raises(AssertionError, match=match):
        bound(factory_for(cls), np.random.default_rng(20261122))
