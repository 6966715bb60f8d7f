"""No function of ``app/stream`` is above cyclomatic complexity 25 (issue 34: the batch fast path
that restated every event rule had 47). ``pyproject.toml`` selects the same rule for all of
``ruff check app tests``; this test holds ``app/stream`` to it whatever the configuration says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX = 25


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter's ruff
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "C901", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_no_function_of_app_stream_is_above_complexity_25() -> None:
    out = _ruff("--config", f"lint.mccabe.max-complexity={MAX}", "app/stream")
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_check_sees_a_complex_function(tmp_path: Path) -> None:
    """Not vacuous: a function of 27 branches is reported."""
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(26))
    (tmp_path / "complex.py").write_text(f"def f(x):\n{body}    return -1\n")
    out = _ruff("--config", f"lint.mccabe.max-complexity={MAX}", str(tmp_path))
    assert out.returncode == 1 and "C901" in out.stdout, out.stdout
