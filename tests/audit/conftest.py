"""One run of ``dpstream audit --quick`` (the CI profile) shared by the tests that read it."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from typing import Any

import pytest

from app.cli import main


@dataclass(frozen=True)
class QuickRun:
    """The exit code, the JSON verdicts and the progress lines of ``audit --quick --json``."""

    code: int
    verdicts: list[dict[str, Any]]
    log: list[str]

    def of(self, mechanism: str) -> list[dict[str, Any]]:
        return [v for v in self.verdicts if v["mechanism"] == mechanism]


@pytest.fixture(scope="session")
def quick_run() -> QuickRun:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["audit", "--quick", "--json"])
    report = json.loads(out.getvalue())
    assert report["exit_code"] == code
    return QuickRun(code, report["verdicts"], err.getvalue().splitlines())
