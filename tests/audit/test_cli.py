"""``dpstream audit``: table, JSON, exit codes."""

from __future__ import annotations

import json

from app.audit.report import exit_code
from app.audit.runners import QUICK
from app.audit.tight import TIGHT_TRIALS
from app.audit.verdict import Verdict
from app.cli import main


def test_audit_verb_prints_json_and_exits_zero(capsys):
    code = main(
        [
            "audit",
            "uniform",
            "--quick",
            "--trials",
            "20",
            "--json",
            "--controls",
            "uniform-half-scale",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 == out["exit_code"]
    statuses = [(v["mechanism"], v["status"]) for v in out["verdicts"]]
    assert statuses == [("uniform", "ok")] * 3 + [("uniform-half-scale", "caught")]
    first = out["verdicts"][0]
    assert {"lower_bound", "eps", "event", "trials", "confidence", "counts"} <= set(first)
    assert first["confidence"] == 0.95 and first["trials"] == 20
    assert first["noise"] == "geometric"  # the service's default noise
    # the worst-case case runs at least its own power analysis' trials, as a control does
    worst = out["verdicts"][2]
    assert worst["scenario"].startswith("worst case") and worst["trials"] == TIGHT_TRIALS


def test_quick_is_the_ci_profile_and_reports_each_mechanism(capsys):
    # --quick alone runs QUICK.trials per input (it ran 2000 before issue 22) and prints a line
    # to stderr as each mechanism's audit ends
    assert main(["audit", "uniform", "pegasus", "--quick", "--no-controls", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    level = [v for v in out["verdicts"] if not v["scenario"].startswith("worst case")]
    assert {v["trials"] for v in level} == {QUICK.trials}
    lines = captured.err.splitlines()
    assert lines[0].startswith("audit: 2 mechanisms and controls")
    assert lines[1].startswith("audit [1/2] uniform (central): 3 cases")
    assert lines[2].startswith("audit [2/2] pegasus (period):")


def test_audit_verb_prints_a_table(capsys):
    assert main(["audit", "sample", "--quick", "--trials", "20", "--no-controls"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:4] == ["mechanism", "kind", "noise", "relation"]
    assert "sample" in out and "verdicts at 95% confidence" in out


def test_exit_code_fails_on_violation_missed_control_or_error_not_on_missing_adapter():
    ok = Verdict("a", "central", status="ok")
    assert exit_code([ok, Verdict("g", "graph", status="no adapter")]) == 0
    for bad in ("VIOLATION", "MISSED", "ERROR"):
        assert exit_code([ok, Verdict("b", "central", status=bad)]) == 1


def test_unknown_names_and_bad_options_are_usage_errors(capsys):
    assert main(["audit", "nope", "--no-controls"]) == 2
    assert main(["audit", "uniform", "--controls", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown 'nope'" in err and "control nope" in err
    try:
        main(["audit", "--trials", "2"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("--trials 2 accepted")
