"""Every registered mechanism passes the quick audit: no lower bound above its claimed eps.

The CI profile (``QUICK``, ``TRIALS`` runs per input, the service's default noise, read from the
session's one ``dpstream audit --quick`` run, ``conftest.py``) has power against 2x bugs on the
worst-case cases (``app.audit.tight``, ``test_quick.py``) and against gross violations elsewhere
(the power controls of ``test_controls.py`` show which); ``dpstream audit`` (2000 runs per
input, all cases) is the full audit (docs/audit.md). Registering a mechanism enrols it here,
as in tests/dp/test_conformance.py; a kind without an adapter gets a "no adapter" verdict.
"""

from __future__ import annotations

import numpy as np
import pytest

from app.audit import ADAPTERS, QUICK
from app.audit.noise import service_noise
from app.audit.tight import GRID_TRIALS, TIGHT, TIGHT_TRIALS
from app.audit.verdict import cases_for
from app.dp.registry import get, names

TRIALS = QUICK.trials


@pytest.mark.parametrize("name", names())
def test_registered_mechanism_passes_the_quick_audit(quick_run, name):
    verdicts = quick_run.of(name)  # the one ``dpstream audit --quick`` run of the session
    assert verdicts, name
    for v in verdicts:
        assert v["status"] in ("ok", "no adapter"), (v["status"], v["lower_bound"], v["eps"])
        assert v["trials"] in (TRIALS, TIGHT_TRIALS, GRID_TRIALS)
    kind = get(name).kind
    if kind in ADAPTERS:
        assert all(v["status"] == "ok" for v in verdicts)
        assert all(v["lower_bound"] is not None and v["lower_bound"] <= v["eps"] for v in verdicts)
        groups = {v["group"] for v in verdicts}
        assert groups == set(range(len(groups)))  # every requirement group audited
    else:
        assert [v["status"] for v in verdicts] == ["no adapter"]
        assert f"no adapter for kind {kind!r}" in verdicts[0]["note"]
    level = [v for v in verdicts if not v["scenario"].startswith("worst case")]
    worst = [v for v in verdicts if v["scenario"].startswith("worst case")]
    assert len(worst) == len(TIGHT.get(name, ()))  # the worst-case cases of app.audit.tight
    if kind in ("central", "period", "graph"):  # audited with what the service builds
        assert {v["noise"] for v in verdicts} == {service_noise(name, get(name))}
    if kind == "period" and name != "pegasus":  # periods of 3 slots: placed on the boundary
        assert {v["scenario"] for v in level} == {"straddle", "sampled"}
    if kind == "graph":  # l = 2 values per slot inside one spatial window (1 if it is one page)
        place_level = name in ("rescuedp", "rescuedp_g")  # n = 1: one page, one value
        allowed = {("add/remove", 1)} if place_level else {("add/remove", 2), ("replace", 4)}
        assert {(v["relation"], v["sensitivity"]) for v in verdicts} == allowed
    if name == "pba":  # personalized central: every group, both relations
        assert {(v["group"], v["w"], v["eps"]) for v in verdicts} == {(0, 3, 1.0), (1, 2, 0.5)}
        assert {(v["relation"], v["sensitivity"]) for v in verdicts} == {
            ("add/remove", 1),
            ("replace", 2),
        }


def test_a_kind_without_adapter_is_a_verdict_not_a_crash():
    class Quantum:
        kind = "quantum"

    cases, verdict = cases_for("qdp", Quantum, QUICK, np.random.default_rng(0))
    assert cases == []
    assert verdict is not None and verdict.status == "no adapter" and not verdict.failed
    assert "no adapter for kind 'quantum'" in verdict.note
