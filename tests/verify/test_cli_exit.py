"""The verb's exit codes: 1 is a violation and nothing else; every error is one line and 2."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.verify import cli
from app.verify.fit import CannotJudge
from app.verify.read import RecordError
from app.verify.verdict import Verdict, Violation
from tests.verify.build import CENTRAL


def args(tmp_path: Path) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    config = tmp_path / "streams.yaml"
    config.write_text(CENTRAL)
    return parser.parse_args(["verify", "-s", "s", "--config", str(config), "--no-progress"])


@pytest.mark.parametrize(
    ("raised", "line"),
    [
        (RecordError("levels partition 1 offset 4: malformed record (x)"), "levels partition 1"),
        (CannotJudge("stream s: nothing to judge"), "nothing to judge"),
        (KeyError("slot"), "cannot judge (KeyError"),  # an unforeseen crash: still not 1
    ],
)
def test_every_error_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, raised, line):
    def verify(*_a, **_k):
        raise raised

    monkeypatch.setattr("app.stream.kafka.probe", lambda *_a, **_k: None)
    monkeypatch.setattr("app.verify.run.verify", verify)
    assert cli._verify(args(tmp_path)) == cli.EXIT_CONFIG == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0], err


def test_a_violation_is_exit_1_and_a_clean_verdict_0(tmp_path, monkeypatch, capsys):
    found = Verdict("s", "central", released=3)
    monkeypatch.setattr("app.stream.kafka.probe", lambda *_a, **_k: None)
    monkeypatch.setattr("app.verify.run.verify", lambda *_a, **_k: found)
    assert cli._verify(args(tmp_path)) == 0
    found.add(Violation("overcount", (4,), "slot 4: 1 more value"))
    assert cli._verify(args(tmp_path)) == cli.EXIT_VIOLATION == 1
    assert "VIOLATION overcount x1" in capsys.readouterr().out
