"""``dpstream audit --quick`` catches every planted bug and passes every registered mechanism.

Issue 33: three defects planted in a scratch copy (every discrete draw at twice its budget, the
grid's sensitivity in steps halved, OptStream's PERTURB calibrated to ``Delta`` instead of ``k
Delta``) went unnoticed by the period cases, whose claims were 2-4 times their pairs' true loss.
The worst-case cases (``app.audit.tight``) claim the computed loss of a pair that realizes it, so
a doubled loss crosses the claim. The three plants and a 2x plant in one mechanism of each kind
are controls of the quick profile; each must be caught, in the very run that passes the
registered mechanisms (one run, read by ``test_registered.py`` and ``test_controls.py`` too).
"""

from __future__ import annotations

import pytest

from app.dp.registry import get, names

ISSUE_33_PLANTS = {  # control -> (kind, the registered mechanism whose worst case it runs)
    "draws-2x": ("central", "sample"),
    "draws-2x-period": ("period", "optstream"),
    "grid-halved": ("period", "optstream"),
    "optstream-delta": ("period", "optstream"),
    "uniform-2x": ("central", "uniform"),
    "optstream-2x": ("period", "optstream"),
    "wn-uniform-2x": ("graph", "wn_uniform"),
    "lpu-2x": ("local", "lpu"),
}


def test_quick_run_exits_zero_with_every_control_caught(quick_run):
    assert quick_run.code == 0
    controls = [v for v in quick_run.verdicts if v["control"]]
    assert controls and all(v["status"] == "caught" for v in controls), [
        (v["mechanism"], v["lower_bound"], v["eps"]) for v in controls if v["status"] != "caught"
    ]
    registered = [v for v in quick_run.verdicts if not v["control"] and v["kind"] != "open"]
    assert {v["mechanism"] for v in registered} == set(names())
    assert all(v["status"] == "ok" for v in registered), [
        (v["mechanism"], v["scenario"], v["lower_bound"], v["eps"])
        for v in registered
        if v["status"] != "ok"
    ]


@pytest.mark.parametrize("plant", sorted(ISSUE_33_PLANTS))
def test_issue_33_plant_is_caught_above_the_claim_its_real_mechanism_passes(quick_run, plant):
    kind, mechanism = ISSUE_33_PLANTS[plant]
    (verdict,) = quick_run.of(plant)
    assert verdict["control"] and verdict["kind"] == kind
    assert verdict["status"] == "caught" and verdict["lower_bound"] > verdict["eps"], verdict
    # the same worst-case pair and computed claim, on the real mechanism: passed
    (real,) = [v for v in quick_run.of(mechanism) if v["scenario"] == verdict["scenario"]]
    assert real["scenario"].startswith("worst case")
    assert (real["eps"], real["w"], real["noise"]) == (
        verdict["eps"],
        verdict["w"],
        verdict["noise"],
    )
    assert real["status"] == "ok" and real["lower_bound"] <= real["eps"]
    assert real["trials"] == verdict["trials"]  # the control shows the real case's own power


def test_every_kind_has_a_worst_case_case_claimed_below_its_level(quick_run):
    worst = [
        v for v in quick_run.verdicts if not v["control"] and v["scenario"].startswith("worst")
    ]
    assert {get(v["mechanism"]).kind for v in worst} == {"central", "graph", "period", "local"}
    for v in worst:
        level = float(v["scenario"].split("level eps ")[1].split(",")[0])
        assert v["eps"] <= level
    # the static and period mechanisms run at the strictest level (2, 2): the one-slot window
    # of group 0 costs eps / W = 1, half its level's eps; a strict period costs eps / 2 = 1
    claims = {(v["mechanism"], v["scenario"]): v["eps"] for v in worst}
    assert claims[("uniform", "worst case, level eps 2")] == 1.0
    assert claims[("sample", "worst case, level eps 2")] == 2.0
    assert claims[("wn_uniform", "worst case, level eps 2")] == 1.0
    assert claims[("optstream", "worst case, level eps 2")] == 1.0
    assert claims[("optstream", "worst case, level eps 2, sums (alpha 1)")] == 1.0
