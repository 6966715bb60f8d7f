"""The power controls: every deliberately broken mechanism is caught, none is registered.

Each control's configuration and trial count come from a power analysis on the ideal Laplace
composition (docs/audit.md); the fixed seed makes the run reproducible, the assertion is the
auditor's own rule (lower bound above the claim at 95% confidence).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.audit.controls import CONTROLS, LPUTwice
from app.audit.noise import service_noise
from app.audit.pairs import local_pair
from app.audit.runners import QUICK, LocalAdapter
from app.audit.verdict import audit_case
from app.dp.period.optstream import OptStream
from app.dp.registry import get, names

SEED = 20261123


@pytest.mark.parametrize("control", CONTROLS, ids=[c.name for c in CONTROLS])
def test_control_is_caught(quick_run, control):
    (verdict,) = quick_run.of(control.name)  # the session's ``dpstream audit --quick`` run
    assert verdict["control"] and verdict["trials"] == max(control.trials, QUICK.trials)
    assert verdict["status"] == "caught", (verdict["lower_bound"], verdict["eps"], verdict["event"])
    assert verdict["lower_bound"] > verdict["eps"]
    if control.name == "uniform-per-slot":
        # w = 10, eps = 1: the true loss is 10; the issue asks for a bound well above 1
        assert (verdict["w"], verdict["eps"]) == (10, 1.0)
        assert verdict["lower_bound"] > 2.0


@pytest.mark.parametrize(
    ("name", "relation", "noise"),
    [
        ("uniform-1.5x-replace", "replace", service_noise("uniform", get("uniform"))),
        ("local-1.5eps", "replace value", ""),
        ("period-2x", "add/remove", service_noise("optstream", OptStream)),
    ],
)
def test_issue_22_controls_run_on_the_service_path(name, relation, noise):
    # issue 22: a 1.5x under-noised central mechanism on replace pairs, a device perturbing at
    # 1.5 eps and a period mechanism spending 2x per window, with the noise the service builds
    (control,) = [c for c in CONTROLS if c.name == name]
    case = control.build()
    assert (case.relation, case.noise) == (relation, noise)


def test_controls_are_never_registered():
    registered = set(names())
    assert not registered & {c.name for c in CONTROLS}


def test_the_sdk_device_stops_the_double_report():
    # the same broken service, but the target runs the real SDK Device: its own ledger refuses
    # every request after the first in its window, so nothing leaks beyond eps
    def build():
        return LPUTwice(d=2, eps=1.0, w=4, users=16)

    case = LocalAdapter().case("lpu-twice+sdk", build, local_pair(build(), 0))
    verdict = audit_case(case, 200, 0.05, np.random.default_rng(SEED), lambda k: None)
    assert verdict.status == "ok" and verdict.lower_bound <= 1.0
