"""The deterministic claims take their tests' outcome: pass, fail, or not run."""

from __future__ import annotations

import subprocess

from app.bench.report import checks


def test_exit_codes_map_to_pass_fail_or_not_run(tmp_path, monkeypatch):
    for ids in checks.CHECKS.values():
        for node in ids:
            path = tmp_path / node.split("::")[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
    for code, outcome in ((0, True), (1, False), (5, None)):

        def fake(args, code=code, **_):
            return subprocess.CompletedProcess(args, code)

        monkeypatch.setattr(checks.subprocess, "run", fake)
        assert set(checks.run_checks(tmp_path).values()) == {outcome}
