"""The budget view of one stream as plain JSON: ``ledger show --json`` and ``GET /budget``.

For each level: the ``(w, eps)`` of the ledger that accounts for it (its own for personalized
mechanisms, the strictest pair for the others), the most any one user of the level spent in
the window of ``w`` slots ending at the last released slot (``window_spent``, exact fraction
and float: the figure ``eps`` bounds, as ``window_spent_means`` says), that as a fraction of
``eps``, and the window's clock times in UTC. The budget of the window's oldest slot is free
again once the next slot is released. ``privacy_unit``: the stream's privacy unit and what one
user can lose across the unit's streams in its interval (:mod:`app.dp.units`). Budgets are
public (they depend on the configuration and the mechanism's released decisions), so this view
may leave the service.

>>> from fractions import Fraction
>>> from app.dp.types import WindowSpend
>>> from app.stream.config import load_streams, DEFAULT_STREAMS
>>> stream = load_streams(DEFAULT_STREAMS)[0]
>>> view = budget_json(stream, [WindowSpend(3, 1.0, Fraction(1, 4))] * len(stream.levels), 10)
>>> level = view["levels"][0]
>>> level["w"], level["window_spent"], level["window_spent_exact"], level["fraction"]
(3, 0.25, '1/4', 0.25)
>>> level["window_first_slot"], level["window_start_utc"] == utc(stream.slots.start(8))
(8, True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.dp.types import WindowSpend
from app.stream.config import StreamConfig
from app.utc import utc

WINDOW_SPENT_MEANS = "max per-user spend in the w-window ending at the last slot"
"""What a level's ``window_spent`` is (the figure its ``eps`` bounds); in local mode two rounds
of a slot may ask disjoint cohorts, so a slot's total ``spent`` can be larger."""


def budget_json(
    stream: StreamConfig, window: Sequence[WindowSpend], last_slot: int | None
) -> dict[str, Any]:
    """The stream's window budget per level (``window``: the mechanism's ``window_report()``,
    one entry per level in level order; ``last_slot``: the last released slot, if any)."""
    levels = []
    for level, spend in zip(stream.levels, window, strict=True):
        row: dict[str, Any] = {
            "level": level.name,
            "w": spend.w,
            "eps": spend.eps,
            "window_spent": float(spend.spent),
            "window_spent_exact": f"{spend.spent.numerator}/{spend.spent.denominator}",
            "fraction": spend.fraction,
        }
        if last_slot is not None:
            first = last_slot - spend.w + 1
            row["window_first_slot"] = first
            row["window_start_utc"] = utc(stream.slots.start(first))
            row["window_end_utc"] = utc(stream.slots.end(last_slot))
        levels.append(row)
    out: dict[str, Any] = {
        "stream": stream.id,
        "mechanism": stream.mechanism,
        "weaker_guarantee": stream.weaker_guarantee,
        "privacy_unit": stream.unit.as_json() if stream.unit else None,
        "slot_s": stream.slot_s,
        "last_slot": last_slot,
        "window_spent_means": WINDOW_SPENT_MEANS,
        "levels": levels,
    }
    if last_slot is not None:
        out["last_slot_start_utc"] = utc(stream.slots.start(last_slot))
        out["last_slot_end_utc"] = utc(stream.slots.end(last_slot))
    return out
