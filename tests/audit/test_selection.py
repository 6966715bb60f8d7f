"""The open-domain key-selection audit: one-user keys within delta, the low threshold caught.

Each assertion is the auditor's own rule (a one-sided Clopper-Pearson lower bound on the release
frequency of a one-user key against the ``delta_t`` the mechanism recorded); seeds are fixed.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.audit.runners import QUICK
from app.audit.selection import CASES, CONTROLS, KEYS_PER_TRIAL, audit_selection
from app.cli import main
from app.dp.open.threshold import rate, singleton_release

SEEDS = range(5)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_registered_selection_passes_and_its_rate_is_the_computed_one(case):
    for seed in SEEDS:
        v = audit_selection(case, QUICK.trials, 0.05, np.random.default_rng(seed))
        assert v.status == "ok" and not v.control, v
        released, n, released_b, _ = v.counts
        assert n == QUICK.trials * KEYS_PER_TRIAL and released_b == 0
        m = case.build()
        q = float(singleton_release(rate(m.selection_budget()[0], m.units), m.tau))
        # 99.99% two-sided normal band around the exact probability (variance n q (1 - q))
        assert abs(released - n * q) <= 3.9 * np.sqrt(n * q * (1 - q)), (released, n * q)


@pytest.mark.parametrize("control", CONTROLS, ids=[c.name for c in CONTROLS])
def test_the_low_threshold_is_caught_at_the_quick_profile(control):
    for seed in SEEDS:
        v = audit_selection(control, QUICK.trials, 0.05, np.random.default_rng(seed))
        assert v.control and v.status == "caught", v


def test_the_cases_run_with_their_control_and_not_without(capsys):
    assert main(["audit", "uniform", "--quick", "--trials", "20", "--json", "--no-controls"]) == 0
    assert all(v["kind"] != "open" for v in json.loads(capsys.readouterr().out)["verdicts"])
    code = main(
        [
            "audit",
            "uniform",
            "--quick",
            "--trials",
            "20",
            "--json",
            "--controls",
            "open-threshold-low",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 == out["exit_code"]
    opened = [(v["mechanism"], v["status"]) for v in out["verdicts"] if v["kind"] == "open"]
    assert opened == [("open_uniform", "ok"), ("open_pba", "ok"), ("open-threshold-low", "caught")]


def test_the_quick_run_has_the_selection_case_and_catches_its_control(quick_run):
    for name, status in (
        ("open_uniform", "ok"),
        ("open_pba", "ok"),
        ("open-threshold-low", "caught"),
    ):
        (v,) = quick_run.of(name)
        assert v["kind"] == "open" and v["status"] == status, v
