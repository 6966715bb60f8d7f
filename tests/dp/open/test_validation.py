"""Constructor rules, the ledger's refusals and the absorption schedule of the open mechanisms."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from app.dp.errors import InsufficientBudgetError, ParameterError
from app.dp.open import Level, OpenLedger, OpenPBA, OpenUniform
from app.dp.open.base import Plan

OK = None


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({}, OK),
        ({"levels": [Level(10, 1.0, 1e-3)]}, OK),
        ({"levels": [[10, 1.0, 1e-6], [5, 2.0, 1e-5]]}, OK),
        ({"levels": []}, "levels must be a non-empty sequence"),
        ({"levels": [[10, 1.0, 2e-3]]}, r"Level.delta must be a finite number > 0 and <= 0.001"),
        ({"levels": [[10, 1.0, 0.0]]}, "Level.delta"),
        ({"levels": [[0, 1.0, 1e-6]]}, "Level.w"),
        ({"levels": [[10, -1.0, 1e-6]]}, "Level.eps"),
        ({"levels": ["nope"]}, "levels"),
        ({"population": 300}, OK),
        ({"population": 10}, r"population=10 is below the selection threshold"),
        ({"max_keys": 0}, "max_keys"),
        ({"sensitivity": 3}, "sensitivity"),
        ({"retire_after": 0}, "retire_after"),
        ({"selection_share": 0}, "selection_share"),
        ({"selection_share": 1.01}, "selection_share"),
        ({"max_key_chars": 0}, "max_key_chars"),
    ],
)
@pytest.mark.parametrize("cls", [OpenUniform, OpenPBA], ids=lambda c: c.name)
def test_constructor_rules(cls, params, error):
    base = {"levels": [Level(4, 4.0, 1e-4)], "population": 10**4}
    if error is OK:
        cls(**{**base, **params})
    else:
        with pytest.raises(ParameterError, match=error):
            cls(**{**base, **params})


def test_the_population_bound_follows_the_threshold():
    m = OpenUniform(levels=[Level(10, 1.0, 1e-6)], population=10**6, sensitivity=2)
    OpenUniform(levels=[Level(10, 1.0, 1e-6)], population=m.tau, sensitivity=2)
    with pytest.raises(ParameterError, match="population"):
        OpenUniform(levels=[Level(10, 1.0, 1e-6)], population=m.tau - 1, sensitivity=2)


def test_events_must_align_and_keys_be_short():
    m = OpenUniform(levels=[Level(4, 4.0, 1e-4)], population=10**4, max_key_chars=4)
    rng = np.random.default_rng(0)
    with pytest.raises(ParameterError, match="align"):
        m.step(np.arange(2), np.array(["a"]), rng)
    with pytest.raises(ParameterError, match="max_key_chars=4"):
        m.step(np.arange(1), np.array(["abcde"]), rng)
    assert m.t == 0


def test_the_ledger_refuses_a_delta_window_above_the_level():
    ledger = OpenLedger([Level(3, 1.0, 1e-4)])
    third = ledger.units[0].total // 3
    for _ in range(3):
        ledger.record([0], [third])
    assert ledger.spent(0) == (0, Fraction(1, 10**4) * 3 * third / ledger.units[0].total)
    with pytest.raises(InsufficientBudgetError, match="delta window"):
        ledger.record([0], [third + 3])
    ledger.record([0], [third])  # the oldest slot left the window


class Greedy(OpenUniform):
    """OpenUniform planning twice its share: the ledger must refuse before any draw."""

    def _plan(self, t):
        plan = super()._plan(t)
        return Plan([2 * e for e in plan.eps], plan.delta)


def test_an_overspending_plan_is_refused_before_any_draw():
    m = Greedy(levels=[Level(1, 4.0, 1e-4)], population=10**4)
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    with pytest.raises(InsufficientBudgetError, match="eps window"):
        m.step(np.arange(3), np.array(["a", "b", "c"]), rng)
    assert rng.bit_generator.state == before and m.t == 0


def test_absorption_publishes_the_skipped_shares_and_nullifies_after():
    """PBA's schedule on the public keys (w = 4, spec seed-000 T11 shape): six still slots
    skip, the jump at slot 8 absorbs w = 4 shares, the next three slots are nullified."""
    m = OpenPBA(levels=[Level(4, 80.0, 1e-4)], population=10**4)  # noise ~ 0 at these rates
    rng = np.random.default_rng(0)
    sizes = [300] * 7 + [900] * 5
    out = [m.step(np.arange(n), np.array(["k"] * n), rng) for n in sizes]
    statuses = [r.status for r in out]
    assert statuses == ["skip"] * 7 + ["publish", "nullified", "nullified", "nullified", "skip"]
    share = Fraction(80, 2 * 4) * Fraction(1, 2)  # (1 - s) eps / (2w)
    selection, dc = Fraction(80, 4) * Fraction(1, 2), share
    assert out[7].eps_spent[0] == selection + dc + 4 * share
    assert all(r.eps_spent[0] == selection + dc for r in out[8:])
    assert [int(r.counts[0]) for r in out] == sizes[:8] + [900] * 4


def test_open_pba_keeps_a_share_for_its_public_keys():
    with pytest.raises(ParameterError, match="selection_share must be below 1 for open_pba"):
        OpenPBA(levels=[Level(4, 4.0, 1e-4)], population=10**4, selection_share=1.0)
