"""Utility of one slot's release of keys against its true key -> count map.

* ``recall(k)``: the share of the true top-k keys (by true count) found among the released
  top-k (by released count, among the keys released above 0: a release of zeros ranks
  nothing), over ``min(k, true keys)``; ties broken by key, so it is defined.
* ``precision``: the share of the released keys that someone sent in the slot (NaN when
  nothing was released).
* ``mae``: the mean absolute error over the union of the true and the released keys; a key not
  released counts as released 0, a released key nobody sent has true count 0.

>>> true = {"a": 10, "b": 5, "c": 1}
>>> released = {"a": 9.0, "c": 2.0, "z": 1.0}
>>> recall(true, released, 2), precision(true, released), mae(true, released)
(0.5, 0.6666666666666666, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping


def top(counts: Mapping[str, float], k: int) -> set[str]:
    """The ``k`` keys of largest count, ties broken by the smaller key."""
    return {key for key, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]}


def recall(true: Mapping[str, int], released: Mapping[str, float], k: int) -> float:
    """Share of the true top-``k`` among the released top-``k`` of the keys released above 0
    (NaN if no key is true)."""
    if not true:
        return math.nan
    ranked = {key: c for key, c in released.items() if c > 0}
    return len(top(true, k) & top(ranked, k)) / min(k, len(true))


def precision(true: Mapping[str, int], released: Mapping[str, float]) -> float:
    """Share of the released keys with a true count above 0 (NaN if none released)."""
    if not released:
        return math.nan
    return sum(1 for key in released if true.get(key, 0) > 0) / len(released)


def mae(true: Mapping[str, int], released: Mapping[str, float]) -> float:
    """Mean absolute error over the union of the true and the released keys."""
    keys = set(true) | set(released)
    if not keys:
        return math.nan
    return sum(abs(released.get(k, 0.0) - true.get(k, 0)) for k in keys) / len(keys)
