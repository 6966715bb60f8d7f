"""The spec's counterexample to the paper's share rule (spec seed-002 §3.1), built once."""

from __future__ import annotations

from typing import Any

from app.dp import registry
from app.dp.types import Group


def paper_split_plpd_plus() -> Any:
    """PLPD+ with the paper's rule ``ceil(z)`` (``split_rule="paper_ceil_z"``): 10,000 users at
    ``(w=62, eps=1)`` and 269 at ``(w=125, eps=1)``, whose reports then cost ``eps/2`` each and
    may fall at slots 1, 63 and 125 of one window of 125."""
    return registry.create(
        "plpd+",
        d=5,
        groups=[Group(62, 1.0), Group(125, 1.0)],
        users=[10_000, 269],
        buckets=256,
        split_rule="paper_ceil_z",
    )
