"""``dpstream audit``: table, JSON, exit codes."""

from __future__ import annotations

import json

from app.audit.report import exit_code
from app.audit.verdict import Verdict
from app.cli import main


def test_audit_verb_prints_json_and_exits_zero(capsys):
    code = main(["audit", "uniform", "--quick", "--trials", "20", "--json",
                 "--controls", "uniform-half-scale"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0 == out["exit_code"]
    statuses = [(v["mechanism"], v["status"]) for v in out["verdicts"]]
    assert statuses == [("uniform", "ok"), ("uniform", "ok"), ("uniform-half-scale", "caught")]
    first = out["verdicts"][0]
    assert {"lower_bound", "eps", "event", "trials", "confidence", "counts"} <= set(first)
    assert first["confidence"] == 0.95 and first["trials"] == 20


def test_audit_verb_prints_a_table(capsys):
    assert main(["audit", "sample", "--quick", "--trials", "20", "--no-controls"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["mechanism", "kind", "relation"]
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
