"""Verdict rules and the helpers over a sweep's means, on hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from app.bench.engine.claims import (
    Verdict,
    best,
    by_any,
    by_majority,
    by_share,
    curves,
    monotone,
    ordered,
    percent_verdict,
    reduction,
)


def test_reduction_by_hand(means):
    m = means([(0.2, 120), (1.0, 120)], {"bd": [10, 5], "pbd": [4, 1]})
    amre, ln, wins, total = reduction(m, "bd", "pbd")
    assert amre == pytest.approx((0.6 + 0.8) / 2)
    assert ln == pytest.approx((1 - math.log(4) / math.log(10) + 1.0) / 2)
    assert (wins, total) == (2, 2)


@pytest.mark.parametrize(
    ("wins", "total", "measured", "paper", "expected"),
    [
        (5, 5, 0.70, 70.8, Verdict.AGREE),
        (5, 5, 0.56, 70.8, Verdict.AGREE),  # 14.8 points off: within the tolerance
        (5, 5, 0.50, 70.8, Verdict.PARTLY),  # 20.8 points off
        (4, 5, 0.70, 70.8, Verdict.PARTLY),  # direction at most points
        (2, 4, 0.70, 70.8, Verdict.DISAGREE),  # half is not most
    ],
)
def test_percent_verdict(wins, total, measured, paper, expected):
    assert percent_verdict(wins, total, measured, paper) == expected


@pytest.mark.parametrize(
    ("rule", "good", "total", "expected"),
    [
        (by_share, 4, 4, Verdict.AGREE),
        (by_share, 3, 4, Verdict.PARTLY),
        (by_share, 2, 4, Verdict.DISAGREE),
        (by_any, 2, 2, Verdict.AGREE),
        (by_any, 1, 2, Verdict.PARTLY),
        (by_any, 0, 2, Verdict.DISAGREE),
        (by_majority, 3, 3, Verdict.AGREE),
        (by_majority, 2, 3, Verdict.PARTLY),
        (by_majority, 1, 2, Verdict.DISAGREE),
    ],
)
def test_verdict_rules(rule, good, total, expected):
    assert rule(good, total) == expected


def test_curves_best_monotone_ordered(means):
    m = means([(0.6, 200), (0.6, 40)], {"a": [3, 1], "b": [2, 2]})
    assert curves(m, ("a", "b"), "w") == {"a": [1.0, 3.0], "b": [2.0, 2.0]}
    assert best(m, ("a", "b")) == ["a", "b"]  # w = 40 first
    assert monotone([1.0, 3.0], increasing=True) and monotone([2.0, 2.0], increasing=False)
    assert not monotone([1.0, 3.0], increasing=False)
    assert ordered({"x": 1.0, "y": 2.0}, ("x", "y")) and not ordered({"x": 1.0, "y": 1.0}, "xy")


def test_verdict_is_a_string():
    assert Verdict.NOT_RUN == "not run" and f"{Verdict.PARTLY}" == "partly"
