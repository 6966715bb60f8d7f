"""The per-user bound over an interval (docs/design.md invariant 9) holds against any spending a
ledger allows and any level history the gap rule allows.

The adversary is as strong as the ledgers let it be: every requirement group spends, slot by
slot, as much as its window budget still allows (or a random part of it), and the user moves
between levels as often as the change gap permits. What the user loses in any run of ``k``
consecutive slots must stay within :func:`app.dp.units.stream_loss`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.units import StreamTerm, UnitBound, relation_factor, slots_touched, stream_loss


def group_spends(w: int, eps: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """A group's spend per slot, ``n`` slots, never more than ``eps`` in any ``w`` in a row:
    each slot takes all of what the window leaves, or a random part of it."""
    out = np.zeros(n)
    for t in range(n):
        left = eps - out[max(0, t - w + 1) : t].sum()
        out[t] = max(0.0, left) * (1.0 if rng.random() < 0.5 else rng.random())
    return out


def history(
    pairs: list[tuple[int, float]], default: int, n: int, rng: np.random.Generator
) -> np.ndarray:
    """A user's level per slot: runs at chosen levels, each change through a gap of
    ``max(w_old, w_new)`` slots at the default level (the service's rule)."""
    levels = np.full(n, default)
    t, current = 0, default
    while t < n:
        new = int(rng.integers(len(pairs)))
        if new != current:
            t += max(pairs[current][0], pairs[new][0])  # the gap: levels[t:t+gap] stay default
        run = int(rng.integers(1, 3 * max(w for w, _ in pairs) + 1))
        levels[t : t + run] = new
        t, current = t + run, new
    return levels


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[tuple[int, float]], int, int, int]:
    count = draw(st.integers(1, 3))
    pairs = [
        (draw(st.integers(1, 12)), draw(st.sampled_from([0.25, 0.5, 1.0, 2.0])))
        for _ in range(count)
    ]
    strictest = (max(w for w, _ in pairs), min(e for _, e in pairs))
    pairs.append(strictest)  # the default level satisfies every level, as the config requires
    return pairs, len(pairs) - 1, draw(st.integers(1, 40)), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=300, deadline=None)
@given(streams())
def test_no_history_and_no_spending_exceeds_the_stream_bound(case):
    pairs, default, k, seed = case
    rng = np.random.default_rng(seed)
    n = 400
    spends = np.stack([group_spends(w, eps, n, rng) for w, eps in pairs])
    levels = history(pairs, default, n, rng)
    loss = spends[levels, np.arange(n)]
    worst = np.convolve(loss, np.ones(k), mode="valid").max()
    assert worst <= stream_loss(k, pairs, default) + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.sampled_from([0.5, 1.0]), st.integers(1, 100))
def test_one_level_bound_is_reached(w, eps, k):
    """The single-level bound is tight: a group spending its whole eps on the first slot of
    every window makes a user at that level lose exactly ``ceil(k / w) * eps``."""
    loss = np.zeros(k)
    loss[::w] = eps
    assert loss.sum() == stream_loss(k, [(w, eps)], default=0) == math.ceil(k / w) * eps


@settings(max_examples=300, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 10), max_value=50, max_denominator=20),
    st.fractions(min_value=Fraction(1, 10), max_value=10, max_denominator=20),
)
def test_slots_touched_is_the_most_an_interval_can_reach(interval, slot):
    """Brute force over placements: the count is reached by some start and never exceeded."""
    starts = [Fraction(i, 400) * slot for i in range(400)] + [slot * (1 - Fraction(1, 10**6))]
    counts = [
        math.ceil((t + interval) / slot) - math.floor(t / slot)  # slots with a point in [t, t+H)
        for t in starts
    ]
    assert max(counts) == slots_touched(interval, slot)


def test_unit_bound_adds_streams_and_checks_its_cap():
    terms = (
        StreamTerm("clicks", 61, 7.0),
        StreamTerm("buys", 2, 1.0 * relation_factor("add-remove")),
    )
    bound = UnitBound("shoppers", 3600.0, terms, cap_eps=8.5)
    assert bound.eps == 9.0 and not bound.within_cap
    assert UnitBound("shoppers", 3600.0, terms, cap_eps=9.0).within_cap
    assert bound.as_json()["streams"] == {
        "clicks": {"slots": 61, "eps": 7.0},
        "buys": {"slots": 2, "eps": 2.0},
    }


@settings(max_examples=100, deadline=None)
@given(streams())
def test_one_ledger_for_every_level_makes_levels_irrelevant(case):
    """A mechanism that is not personalized spends one ledger at the strictest pair for all
    users: whatever a user's level history, it loses what that ledger spent."""
    pairs, default, k, seed = case
    w, eps = pairs[default]
    spends = group_spends(w, eps, 400, np.random.default_rng(seed))
    worst = np.convolve(spends, np.ones(k), mode="valid").max()
    assert worst <= stream_loss(k, [(w, eps)] * len(pairs), default, per_group=False) + 1e-9


def test_a_unit_with_open_streams_adds_their_delta_and_checks_its_delta_cap():
    terms = (
        StreamTerm("clicks", 61, 7.0),  # a labels stream: pure eps, no delta term
        StreamTerm("urls", 121, 123.0, 0.0123),
        StreamTerm("terms", 516, 208.0, 0.00208),
    )
    bound = UnitBound("people", 3600.0, terms, cap_delta=0.014)
    assert bound.delta == 0.0123 + 0.00208 and bound.states_delta
    assert not bound.within_cap_delta and bound.within_cap
    assert UnitBound("people", 3600.0, terms, cap_delta=0.015).within_cap_delta
    shown = bound.as_json()
    assert (shown["bound_delta"], shown["cap_delta"]) == (bound.delta, 0.014)
    assert shown["streams"] == {
        "clicks": {"slots": 61, "eps": 7.0},
        "urls": {"slots": 121, "eps": 123.0, "delta": 0.0123},
        "terms": {"slots": 516, "eps": 208.0, "delta": 0.00208},
    }


def test_a_unit_without_open_streams_states_no_delta():
    """Pure eps-DP: delta 0, and its JSON keeps the keys (and their order) it had before."""
    bound = UnitBound("shoppers", 3600.0, (StreamTerm("clicks", 61, 7.0),), cap_eps=8.0)
    assert bound.delta == 0.0 and not bound.states_delta and bound.within_cap_delta
    assert list(bound.as_json()) == [
        "unit",
        "interval_s",
        "bound_eps",
        "cap_eps",
        "relation",
        "streams",
    ]
