"""The event search and its holdout evaluation on samples with a known answer."""

from __future__ import annotations

import numpy as np

from app.audit.events import MAX_THRESHOLDS, Event, evaluate, search


def test_a_pattern_that_only_one_input_produces_is_found():
    rng = np.random.default_rng(3)
    n = 400
    a = rng.normal(size=(n, 2))
    b = rng.normal(size=(n, 2))
    pa = np.full(n, 7, dtype=np.int64)  # A always shows pattern 7
    pb = rng.choice([1, 2], size=n).astype(np.int64)
    event = search(["u", "v"], a[:200], b[:200], pa[:200], pb[:200], 0.05)
    assert (event.feature, event.op, event.threshold, event.favours) == ("pattern", "==", 7.0, "A")
    result = evaluate(event, ["u", "v"], a[200:], b[200:], pa[200:], pb[200:], 0.05)
    assert (result.k_a, result.k_b) == (200, 0)
    # exact: ln(lower(200/200) / upper(0/200)) with both at 97.5%
    expected = np.log(0.025 ** (1 / 200) / (1 - 0.025 ** (1 / 200)))
    assert abs(result.lower_bound - expected) < 1e-9


def test_identical_inputs_certify_nothing():
    rng = np.random.default_rng(4)
    x = rng.laplace(size=(2000, 3))
    p = np.zeros(2000, dtype=np.int64)
    event = search(["a", "b", "c"], x[:500], x[1000:1500], p[:500], p[:500], 0.05)
    result = evaluate(event, ["a", "b", "c"], x[500:1000], x[1500:], p[:500], p[:500], 0.05)
    assert result.lower_bound < 0.3


def test_thresholds_are_thinned_to_quantiles():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(5000, 1)), rng.normal(1, 1, size=(5000, 1))
    p = np.zeros(5000, dtype=np.int64)
    event = search(["x"], a, b, p, p, 0.05)
    assert event.feature == "x" and event.search_bound > 0
    assert MAX_THRESHOLDS == 256


def test_event_describes_itself():
    e = Event("loss_stat", ">=", 1.5, "A", 0.9)
    assert e.describe() == "loss_stat >= 1.5 (likelier on A)"
    assert Event("pattern", "==", 4.0, "B", 1.0).describe("ppn") == "pattern == ppn (likelier on B)"
    assert e.occurs(np.array([1.0, 1.5, 2.0])).tolist() == [False, True, True]
