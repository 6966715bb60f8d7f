"""The claims that are deterministic checks rather than measurements (OptStream H8, Theorem 12
on every period; (w,n) T7, the privacy invariants): their verdict is the outcome of the tests
that check them, run now.

:func:`run_checks` runs each check's tests with this interpreter's pytest from the repository
root and returns ``name -> passed``: True when they pass, False when one fails, None when they
did not run (an installed package without its ``tests/``, no pytest, no test collected).

>>> sorted(CHECKS)
['theorem12', 'wn_invariants']
>>> run_checks(Path("/nonexistent"))
{'theorem12': None, 'wn_invariants': None}
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

__all__ = ["CHECKS", "run_checks"]

CHECKS: dict[str, tuple[str, ...]] = {
    "theorem12": ("tests/dp/period/test_guarantees.py::test_theorem_12_on_every_period",),
    "wn_invariants": ("tests/dp/wn/test_invariants.py",),
}
"""Check -> its pytest node ids (seconds each)."""
OUTCOMES = {0: True, 1: False}
"""pytest's exit codes: 0 all passed, 1 some failed; the others (interrupted, usage error, no
tests collected, pytest missing) mean the check did not run."""


def run_checks(root: Path = Path(".")) -> dict[str, bool | None]:
    """Run every check's tests under ``root``; None for a check whose test files are missing."""
    out: dict[str, bool | None] = {}
    if importlib.util.find_spec("pytest") is None:  # `python -m pytest` would exit 1
        return dict.fromkeys(CHECKS)
    for name, ids in CHECKS.items():
        if not all((root / i.split("::")[0]).exists() for i in ids):
            out[name] = None
            continue
        done = subprocess.run(  # noqa: S603 - our own interpreter, fixed arguments
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ids],
            cwd=root,
            capture_output=True,
            check=False,
        )
        out[name] = OUTCOMES.get(done.returncode)
    return out
