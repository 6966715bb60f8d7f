"""Every registered mechanism still does exactly what ``tests/dp/data/pins.json`` recorded.

The file is written by ``tests/dp/make_pins.py`` from the code as it was; a refactoring of the
core must leave it true: the same parameters and parameter fingerprints (a restarted service
compares the fingerprint in a ledger's state envelope, so a changed one would refuse every
existing stream), the same state after a seeded run, and the same releases bit for bit.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from app.dp.registry import names

HERE = Path(__file__).resolve().parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_pins", HERE / "make_pins.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = _script()
PINNED: dict[str, Any] = json.loads((HERE / "data" / "pins.json").read_text())


def test_every_registered_mechanism_is_pinned():
    assert sorted(PINNED["mechanisms"]) == sorted(names())


@pytest.mark.parametrize("name", sorted(PINNED["mechanisms"]))
def test_mechanism_matches_its_pin(name):
    now, then = SCRIPT.run(name), PINNED["mechanisms"][name]
    assert now["params"] == then["params"]
    assert now["fingerprint"] == then["fingerprint"]
    assert now["describe"] == then["describe"]
    assert len(now["releases"]) == len(then["releases"])
    for mine, pinned in zip(now["releases"], then["releases"], strict=True):
        assert mine == pinned, f"slot {pinned['slot']}"
    assert now["state"] == then["state"]


def test_stream_fingerprints_match_their_pins():
    assert SCRIPT.stream_configs() == PINNED["streams"]
