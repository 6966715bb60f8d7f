"""Write ``tests/dp/data/pins.json``: what every registered mechanism does today.

Run from the repository root, only when a change of outputs is intended (and the mechanism's
``version`` bumped)::

    .venv/bin/python tests/dp/make_pins.py

For each registered name, built from its ``test_params``, the file keeps its parameters, its
parameter fingerprint (what a ledger's state envelope carries, so what a restarted service
compares), a digest of its state after a short seeded run, and the releases of that run; and
the fingerprints of a few stream configurations built through ``for_stream``.
``tests/dp/test_pins.py`` asserts that the code still gives exactly these. Never edit the file
by hand.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.dp.checks import Trace, factory_for  # noqa: E402
from app.dp.checks.suite import adapter  # noqa: E402
from app.dp.graph import Graph  # noqa: E402
from app.dp.registry import get, names  # noqa: E402
from app.dp.types import Group  # noqa: E402

PINS = Path(__file__).resolve().parent / "data" / "pins.json"
SEED = 20260426
SLOTS = {"central": 24, "graph": 24, "period": 24, "local": 10}


def plain(value: Any) -> Any:
    """A release field as JSON: arrays as lists, exact fractions as strings."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value


def release_record(release: Any) -> dict[str, Any]:
    return {f.name: plain(getattr(release, f.name)) for f in dataclasses.fields(release)}


# Significant digits a float keeps in the state digest: the same state on another CPU or BLAS
# may differ in the last bits of a float sum (the releases are compared with PIN_REL_TOL).
STATE_DIGITS = 12


def rounded(value: Any) -> Any:
    """``value`` with every float rounded to ``STATE_DIGITS`` significant digits."""
    if isinstance(value, float):
        return float(f"{value:.{STATE_DIGITS}g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def state_digest(m: Any) -> str:
    packed = msgpack.packb(rounded(m.state_dict()), use_bin_type=True, strict_types=True)
    return hashlib.sha256(packed).hexdigest()


def run(name: str) -> dict[str, Any]:
    """Build ``name`` from its test parameters and run it on seeded inputs."""
    cls = get(name)
    a = adapter(cls.kind)
    m = factory_for(cls)()
    fingerprint = m.fingerprint()
    rng = np.random.default_rng(SEED)
    inputs = a.inputs(m, rng, SLOTS[cls.kind])
    trace = Trace()
    for x in inputs:
        a.step(m, x, rng, trace)
    return {
        "params": json.loads(json.dumps(m.params())),
        "fingerprint": fingerprint,
        "describe": m.describe(),
        "state": state_digest(m),
        "releases": [release_record(r) for r in trace.releases],
    }


def stream_configs() -> dict[str, Any]:
    """Mechanisms as a service builds them, ``for_stream(d, groups, **params)``."""
    levels = [Group(10, 1.0), Group(30, 0.5)]
    graph = Graph.from_config(4, [[0, 1], [1, 2], [2, 3]], None, 4)
    configs: list[tuple[str, str, dict[str, Any]]] = [
        ("pba-replace", "pba", {"noise": "geometric", "sensitivity": 2}),
        ("pbd", "pbd", {}),
        ("uniform", "uniform", {"noise": "laplace"}),
        ("lbu", "lbu", {"users": 1000}),
        ("lpd", "lpd", {"users": 1000, "min_users": 3}),
        ("plbu", "plbu", {"users": [600, 400]}),
        ("plpa+", "plpa+", {"users": [600, 400], "split_rule": "paper_ceil_z"}),
        ("plba-ops", "plba-ops", {"users": [600, 400]}),
        ("plbd-rp", "plbd-rp", {"users": [600, 400], "dis_on_raw": True}),
        ("optstream", "optstream", {"k": 4, "alpha": 2.0}),
        ("dft", "dft", {"k": 3, "strict": False}),
        ("stbd", "stbd", {"n": 2, "graph": graph}),
        ("str", "str", {"n": 2, "grid": [2, 2], "neighbours": 8, "kp": 0.5}),
        ("rescuedp", "rescuedp", {"theta": 5.0}),
    ]
    out = {}
    for label, name, params in configs:
        m = get(name).for_stream(4, levels, **params)
        out[label] = {
            "params": json.loads(json.dumps(m.params())),
            "fingerprint": m.fingerprint(),
        }
    return out


def pins() -> dict[str, Any]:
    return {"mechanisms": {n: run(n) for n in names()}, "streams": stream_configs()}


def dumps(value: Any) -> str:
    """Indented JSON with every list of scalars on one line (a readable, diffable file)."""
    text = json.dumps(value, indent=1, sort_keys=True)
    return re.sub(r"\[\s+([^\[\]{}]*?)\s+\]", lambda m: f"[{' '.join(m[1].split())}]", text)


def main() -> None:
    PINS.parent.mkdir(exist_ok=True)
    PINS.write_text(dumps(pins()) + "\n")
    print(f"wrote {PINS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
