"""Every registered mechanism still does exactly what ``tests/dp/data/pins.json`` recorded.

The file is written by ``tests/dp/make_pins.py`` from the code as it was; a refactoring of the
core must leave it true: the same parameters and parameter fingerprints (a restarted service
compares the fingerprint in a ledger's state envelope, so a changed one would refuse every
existing stream), the same state after a seeded run, and the same releases.

"The same" is exact for every integer, string, decision (``fresh``, ``status``) and exact
budget fraction. A float is compared with a relative tolerance of ``PIN_REL_TOL``: the same code
on another CPU or another build of numpy and scipy (SIMD sums, the NNLS of OptStream's
post-processing) may differ in the last bits (seen: ``4187.039194915252`` against ``...255``,
a relative difference of 7e-16), while any change of a mechanism's logic or noise moves a
release by far more than 1e-9 of its value.
"""

from __future__ import annotations

import importlib.util
import json
import math
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
PIN_REL_TOL = 1e-9


def same(now: Any, pinned: Any) -> bool:
    """``now`` equals ``pinned``: exactly, but for floats, which agree to ``PIN_REL_TOL``."""
    if isinstance(pinned, float) and isinstance(now, float):
        return math.isclose(now, pinned, rel_tol=PIN_REL_TOL, abs_tol=PIN_REL_TOL)
    if isinstance(pinned, list) and isinstance(now, list):
        return len(now) == len(pinned) and all(map(same, now, pinned))
    if isinstance(pinned, dict) and isinstance(now, dict):
        return now.keys() == pinned.keys() and all(same(now[k], pinned[k]) for k in pinned)
    return type(now) is type(pinned) and now == pinned


def test_float_tolerance_is_tight():
    """The comparison forgives a float's last bits and nothing else."""
    assert same([4187.039194915252, 1, "publish"], [4187.039194915255, 1, "publish"])
    assert not same([4187.04], [4187.039194915255])
    assert not same({"fresh": True}, {"fresh": False})
    assert not same([3], [3.0]) and not same([1, 2], [1, 2, 3])


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
        assert same(mine, pinned), f"slot {pinned['slot']}: {mine} != {pinned}"
    assert now["state"] == then["state"]


def test_stream_fingerprints_match_their_pins():
    assert SCRIPT.stream_configs() == PINNED["streams"]
