"""One run of ``dpstream audit --quick`` (the CI profile) shared by the tests that read it.

Under pytest-xdist every worker would run its own: the first worker to need it runs it and
writes it beside the workers' temporary folders; the others wait on a lock and read it.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
from dataclasses import asdict, dataclass
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


def _run() -> QuickRun:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["audit", "--quick", "--json"])
    report = json.loads(out.getvalue())
    assert report["exit_code"] == code
    return QuickRun(code, report["verdicts"], err.getvalue().splitlines())


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> QuickRun:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return _run()
    shared = tmp_path_factory.getbasetemp().parent  # one folder per session, all workers
    path = shared / "audit-quick.json"
    with open(shared / "audit-quick.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            path.write_text(json.dumps(asdict(_run())))
        return QuickRun(**json.loads(path.read_text()))
