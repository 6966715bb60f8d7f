"""group_counts: the vectorized bincount equals a naive count."""

from __future__ import annotations

import numpy as np
import pytest

from app.bench.engine import replay
from app.bench.engine.replay import group_counts


def naive(values: np.ndarray, user_group: np.ndarray, m: int, d: int) -> np.ndarray:
    out = np.zeros((values.shape[0], m, d), dtype=np.int64)
    for t in range(values.shape[0]):
        for i in range(values.shape[1]):
            if values[t, i] >= 0:
                out[t, user_group[i], values[t, i]] += 1
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_group_counts_equals_naive_count(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    T, N, m, d = 13, 40, 3, 7  # noqa: N806
    values = rng.integers(-1, d, size=(T, N)).astype(np.int16)  # -1: no record
    user_group = rng.integers(0, m, size=N)
    expected = naive(values, user_group, m, d)
    assert np.array_equal(group_counts(values, user_group, m, d), expected)
    monkeypatch.setattr(replay, "_BLOCK_CELLS", 50)  # several slot blocks, one ragged
    assert np.array_equal(group_counts(values, user_group, m, d), expected)


def test_group_counts_skips_negative_values_and_keeps_totals() -> None:
    values = np.array([[-1, -1], [0, -1]])
    counts = group_counts(values, np.array([0, 1]), 2, 1)
    assert counts.sum(axis=(1, 2)).tolist() == [0, 1]


@pytest.mark.parametrize(
    ("values", "groups", "m", "d", "match"),
    [
        (np.zeros((2, 3), dtype=int), [0, 0], 1, 1, "user_group"),
        (np.zeros((2, 2), dtype=int), [0, 1], 1, 1, "user_group must lie"),
        (np.full((2, 2), 5), [0, 0], 1, 5, "values must be < d"),
        (np.zeros((2, 2)), [0, 0], 1, 1, "integer"),
    ],
)
def test_group_counts_rejects_bad_input(
    values: np.ndarray, groups: list[int], m: int, d: int, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        group_counts(values, groups, m, d)
