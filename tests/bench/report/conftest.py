"""Hand-made means for the report's claim tests: no benchmark runs."""

from __future__ import annotations

import pytest


def sweep(points, values):
    """Means ``(eps, w, mech) -> (mean, 0, 1)``: ``values[mech][k]`` at ``points[k]``."""
    return {
        (e, w, m): (float(v[k]), 0.0, 1)
        for m, v in values.items()
        for k, (e, w) in enumerate(points)
    }


EPS = [(0.2, 120), (0.6, 120), (1.0, 120)]
W = [(0.6, 40), (0.6, 120), (0.6, 200)]


@pytest.fixture
def means():
    """``means(points, values)``: see :func:`sweep`."""
    return sweep
