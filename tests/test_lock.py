"""The tests run with the dependency versions ``constraints.txt`` locks (``scripts/lock.sh``).

A fresh clone installs exactly these (the README, ``scripts/test.sh``, ``.ci/run``, the
Dockerfile), so a test that is green here is green there: pinned floats and hypothesis' shrinking
depend on the versions of numpy, scipy and hypothesis.
"""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def canonical(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, sep, pinned = line.partition("==")
            assert sep and pinned, f"not an exact pin: {line!r}"
            pins[canonical(name)] = pinned
    return pins


def declared() -> set[str]:
    """Every distribution pyproject.toml asks for, in any extra (the project itself aside)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    names = {canonical(m[0]) for r in requirements if (m := NAME.match(r))}
    return names - {"dpstream"}


def test_every_declared_dependency_is_locked():
    assert declared() - locked().keys() == set()


def test_installed_versions_are_the_locked_ones():
    pins, seen = locked(), {}
    for name in pins:
        try:
            seen[name] = version(name)
        except PackageNotFoundError:
            continue  # the deployment tools' packages, installed only by the full tier
    assert {n: v for n, v in seen.items() if v != pins[n]} == {}
    assert {"numpy", "scipy", "hypothesis", "faust-streaming"} <= seen.keys()
