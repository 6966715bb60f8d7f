"""One user's worst-case loss over an interval of time, across the streams of a privacy unit.

Each stream states its guarantee per window of ``w`` slots: a user's data in any ``w``
consecutive slots costs at most ``eps`` (at the user's level). A deployment runs several
streams over the same users (page views, purchases, searches): a *privacy unit* is a set of
streams that share one user id space, and what a user loses in it is the sum of what each
stream costs that user. This module turns the streams' per-window statements into one figure
for an interval of ``H`` seconds (an hour, a day), the bound that docs/design.md invariant 9 asks to
compute, show and, where capped, enforce.

For one stream with slots of ``s`` seconds, an interval of ``H`` seconds touches at most
:func:`slots_touched` slots. Those are covered by ``ceil(k / w)`` windows of ``w`` slots, so a
user whose level stays put loses at most ``ceil(k / w) * eps`` (:func:`stream_loss`).

A user may change level inside the interval. The service counts a changing user at the default
level (the strictest pair) through a gap of ``max(w_old, w_new)`` slots, so a window of the
smallest ``w`` holds at most two runs: one at a level ``a`` and one at the default level, whose
spends are bounded by ``eps_a`` and ``eps_default`` (each part lies inside a window of its own
level). With a ledger per level (a personalized mechanism), the bound is therefore
``ceil(k / w_min) * (max eps_a + eps_default)``; with one ledger (a mechanism that is not
personalized accounts every user at the strictest pair), ``ceil(k / w) * eps``.

A stream under the add-remove relation states ``eps`` for adding or removing a user's data; a
change of one user's values costs twice that. A unit's figure is stated in the service's
default relation, ``replace``, so those streams count double (:func:`relation_factor`).

Open-domain streams (``domain: open``, :mod:`app.dp.open`) are ``(eps, delta)``-DP per window:
each level's ledger keeps the sum of ``delta`` over any ``w`` slots within the level's ``delta``
as it keeps ``eps`` (:mod:`app.dp.open.ledger`). By basic composition the deltas of the slots
an interval touches add up like their eps, so a stream's delta term is :func:`stream_loss` on
the levels' ``(w, delta)`` pairs, and a unit's delta is the sum of its streams' (0 for a unit
without an open stream: pure eps-DP). The relation factor applies to delta once, and only to
convert an ``add-remove`` stream to ``replace``; it never double-counts, because an open
mechanism is calibrated for its own stream's relation (``sensitivity`` 2 under ``replace``,
1 under ``add-remove``, :attr:`app.stream.config.model.StreamConfig.sensitivity`): with
``Delta = sensitivity * max_keys`` the counts are drawn at ``eps_t / Delta`` and the threshold
is set so that the keys only the changed user holds (at most ``Delta`` over both sides) pass
with total probability at most ``delta_t`` (:mod:`app.dp.open.threshold`). So

* a ``replace`` stream's ``(eps_t, delta_t)`` already is the replace guarantee: factor 1;
* an ``add-remove`` stream (``Delta = max_keys``) under one replacement moves the count vector
  by at most ``2 max_keys`` in L1 (``2 eps_t``, the Laplace ratio) and has at most
  ``2 max_keys`` one-sided keys, each passing with probability ``delta_t / max_keys``: the
  union bound gives ``2 delta_t``. Factor 2 on both, from the mechanism's own argument (generic
  group privacy would give ``(1 + e**eps_t) delta_t``, larger and not needed here).

>>> slots_touched(Fraction(3600), Fraction(60)), slots_touched(Fraction(90), Fraction(60))
(61, 3)
>>> stream_loss(61, [(10, 1.0)], default=0)
7.0
>>> stream_loss(61, [(10, 1.0), (20, 0.5)], default=1)
10.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

Pair = tuple[int, float]
"""The ``(w, eps)`` of a ledger that accounts for a level."""


def slots_touched(interval_s: Fraction, slot_s: Fraction) -> int:
    """The most slots of ``slot_s`` seconds that an interval of ``interval_s`` seconds
    (half-open, placed anywhere) has points in: ``H/s + 1`` if it divides, ``ceil(H/s) + 1``
    otherwise (an interval that starts just before a slot boundary reaches one slot more).

    >>> slots_touched(Fraction(60), Fraction(60)), slots_touched(Fraction(5, 2), Fraction(1))
    (2, 4)
    """
    if interval_s <= 0 or slot_s <= 0:
        raise ValueError("an interval and a slot have a positive length")
    ratio = interval_s / slot_s
    return math.ceil(ratio) + 1


def stream_loss(slots: int, pairs: Sequence[Pair], default: int, per_group: bool = True) -> float:
    """The most one user loses in ``slots`` consecutive slots of one stream whose levels are
    accounted at ``pairs`` (``default``: the index of the default level's pair;
    ``per_group``: whether each level has a ledger of its own, as a personalized mechanism
    keeps, or one ledger accounts for all, as the others keep at the strictest pair)."""
    if slots < 1 or not pairs:
        raise ValueError("a stream loss needs at least one slot and one level")
    if len(pairs) == 1 or not per_group:
        w, eps = pairs[0]
        return math.ceil(slots / w) * eps
    w_min = min(w for w, _ in pairs)
    per_window = max(eps for _, eps in pairs) + pairs[default][1]
    return math.ceil(slots / w_min) * per_window


def relation_factor(neighbours: str) -> int:
    """How many times a stream's ``eps`` one change of a user's values costs: 2 under
    add-remove (remove, then add), 1 under replace."""
    return 2 if neighbours.startswith("add-remove") else 1


@dataclass(frozen=True)
class StreamTerm:
    """One stream's share of a unit's bound."""

    stream: str
    slots: int
    """The most slots an interval touches."""
    loss: float
    """The most one user loses in them, in the ``replace`` relation."""
    delta: float | None = None
    """The most delta one user loses in them, in ``replace`` (None: the stream is pure eps-DP)."""


@dataclass(frozen=True)
class UnitBound:
    """A privacy unit's worst case: what one user can lose in any interval of ``interval_s``."""

    unit: str
    interval_s: float
    terms: tuple[StreamTerm, ...]
    cap_eps: float | None = None
    cap_delta: float | None = None

    @property
    def eps(self) -> float:
        """The bound: the sum of the streams' terms."""
        return math.fsum(t.loss for t in self.terms)

    @property
    def delta(self) -> float:
        """The bound's delta: the sum of the open streams' delta terms (0 without one)."""
        return math.fsum(t.delta for t in self.terms if t.delta is not None)

    @property
    def states_delta(self) -> bool:
        """Whether the bound is an ``(eps, delta)`` one: an open stream or a ``cap_delta``."""
        return self.cap_delta is not None or any(t.delta is not None for t in self.terms)

    @property
    def within_cap(self) -> bool:
        return self.cap_eps is None or self.eps <= self.cap_eps

    @property
    def within_cap_delta(self) -> bool:
        return self.cap_delta is None or self.delta <= self.cap_delta

    def as_json(self) -> dict[str, object]:
        """The bound as plain JSON (``/budget``, audit records, ``ledger show``); the delta
        keys only when :attr:`states_delta` (a pure-eps unit's record is unchanged)."""
        delta = {"bound_delta": self.delta, "cap_delta": self.cap_delta}
        return {
            "unit": self.unit,
            "interval_s": self.interval_s,
            "bound_eps": self.eps,
            "cap_eps": self.cap_eps,
            **(delta if self.states_delta else {}),
            "relation": "replace",
            "streams": {t.stream: _term_json(t) for t in self.terms},
        }


def _term_json(term: StreamTerm) -> dict[str, object]:
    out: dict[str, object] = {"slots": term.slots, "eps": term.loss}
    if term.delta is not None:
        out["delta"] = term.delta
    return out
