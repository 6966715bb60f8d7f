"""A test that turns the collector's fast path off patches a method that exists (a patch of a
renamed method would silently test the fast path against itself)."""

from __future__ import annotations

import re
from pathlib import Path

from app.stream.collect.events import Collector

TESTS = Path(__file__).resolve().parents[1]


def test_every_patched_collector_method_exists() -> None:
    patched = set()
    for path in TESTS.rglob("*.py"):
        patched |= set(re.findall(r"\b(?:reference|fast)\.(_\w+) = lambda", path.read_text()))
    assert patched, "no test turns the fast path off"
    assert {name for name in patched if not hasattr(Collector, name)} == set()
