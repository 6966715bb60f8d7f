"""The budget view of one stream as plain JSON: ``ledger show --json`` and ``GET /budget``.

For each level: the ``(w, eps)`` of the ledger that accounts for it (its own for personalized
mechanisms, the strictest pair for the others), the most any one user of the level spent in
the window of ``w`` slots ending at the last released slot (``window_spent``, exact fraction
and float: the figure ``eps`` bounds, as ``window_spent_means`` says), that as a fraction of
``eps``, and the window's clock times in UTC. The budget of the window's oldest slot is free
again once the next slot is released. ``privacy_unit``: the stream's privacy unit and what one
user can lose across the unit's streams in its interval (:mod:`app.dp.units`). An open-domain
stream's levels are (eps, delta)-DP over their windows: each row adds ``delta``,
``window_delta_spent`` (exact and float) and ``delta_fraction`` beside the eps figures. Budgets
are public (they depend on the configuration and the mechanism's released decisions), so this view
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
>>> from app.dp.open.release import OpenWindowSpend
>>> spend = OpenWindowSpend(3, 1.0, Fraction(1, 2), 1e-5, Fraction(1, 400_000))
>>> row = budget_json(stream, [spend] * len(stream.levels), 10)["levels"][0]
>>> row["delta"], row["window_delta_spent_exact"], row["delta_fraction"]
(1e-05, '1/400000', 0.25)
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from app.dp.open.release import OpenWindowSpend
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
            "window_spent_exact": _exact(spend.spent),
            "fraction": spend.fraction,
        }
        if isinstance(spend, OpenWindowSpend):
            row["delta"] = spend.delta
            row["window_delta_spent"] = float(spend.delta_spent)
            row["window_delta_spent_exact"] = _exact(spend.delta_spent)
            row["delta_fraction"] = spend.delta_fraction
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


def _exact(x: Fraction) -> str:
    """An exact budget as text, ``"p/q"``."""
    return f"{x.numerator}/{x.denominator}"
