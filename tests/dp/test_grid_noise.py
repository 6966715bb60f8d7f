"""Issue 21 item 4: the period mechanisms' noise is DP as implemented.

The ``geometric`` noise of real-valued quantities (:func:`app.dp.noise.add_noise` on a grid)
gives outputs on a public grid, and the probability of every output is a product of discrete
Laplace masses, so the ratio between neighbouring inputs is computed exactly here (no Monte
Carlo): it never exceeds ``exp(eps)``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from app.dp.errors import ParameterError
from app.dp.noise import GRID_LIMIT, ScalarNoise, add_noise, check_grid, grid_step, grid_units
from app.dp.period import DFT, HierOptStream, OptStream, PeGaSus
from app.dp.period.dft import dft_scale
from app.dp.registry import create
from app.dp.types import Group

EPS = 1.0


def log_mass_ratio(m: np.ndarray, m_other: np.ndarray, out: np.ndarray, units: int) -> float:
    """``ln P(out | m) / P(out | m')`` of discrete Laplace noise with ``exp(-eps/units)``: the
    normalizing constants cancel, so it is ``eps / units`` times an integer difference."""
    steps = int(np.abs(out - m_other).sum() - np.abs(out - m).sum())
    return EPS * steps / units


def floored(values: np.ndarray, step: float) -> np.ndarray:
    return np.floor(values / step).astype(np.int64)


@pytest.mark.parametrize("seed", range(5))
def test_grid_outputs_are_on_the_grid_and_the_ratio_is_within_eps(seed):
    """Neighbouring real vectors (L1 distance at most the sensitivity, any direction): every
    output lies on the grid, and for every output reachable from either, the exact log ratio
    is at most eps (the integer distance of the floored vectors is at most ``units``)."""
    rng = np.random.default_rng(seed)
    sensitivity = float(rng.uniform(0.5, 20.0))
    x = rng.uniform(-1e4, 1e4, (3, 4))
    move = rng.laplace(size=x.shape)
    y = x + move / np.abs(move).sum() * sensitivity * rng.uniform(0.5, 1.0)
    step = grid_step(sensitivity, x.size)
    units = grid_units(sensitivity, x.size, step)
    assert math.log2(step).is_integer()
    out = add_noise("geometric", np.random.default_rng(seed), x, EPS, sensitivity)
    assert np.all(out / step == np.rint(out / step))  # on the grid
    m, m_other = floored(x, step), floored(y, step)
    assert int(np.abs(m - m_other).sum()) <= units
    grid_out = np.rint(out / step).astype(np.int64)
    # outputs reachable from both: every vector of integers; the worst one sits beyond both
    worst = m + np.sign(m - m_other) * 10**6
    for o in (grid_out, worst, m, m_other):
        assert log_mass_ratio(m, m_other, o, units) <= EPS
        assert log_mass_ratio(m_other, m, o, units) <= EPS


def test_worst_case_shift_reaches_but_never_passes_eps():
    """The grid's slack is tight: a shift of exactly the sensitivity lands within the units."""
    sensitivity = 3.0
    step = grid_step(sensitivity, 1)
    units = grid_units(sensitivity, 1, step)
    for start in np.linspace(-5, 5, 101):
        a = floored(np.array([start]), step)
        b = floored(np.array([start + sensitivity]), step)
        assert abs(int(b[0] - a[0])) <= units
    assert Fraction(units) <= Fraction(sensitivity / step) + 2


def test_exact_noise_on_counts_stays_integer():
    counts = np.array([[3.0, 0.0, 7.0]])
    out = add_noise("geometric", np.random.default_rng(1), counts, 0.5, 4, exact=True)
    assert np.array_equal(out, np.rint(out))
    with pytest.raises(ValueError, match="integer sensitivity"):
        add_noise("geometric", np.random.default_rng(1), counts, 0.5, 2.5, exact=True)


def test_svt_noise_threshold_and_answers_share_one_grid():
    svt = ScalarNoise("geometric", 76.0)
    rng = np.random.default_rng(2)
    for value, factor in ((1000.0, 2), (12.3, 40), (-4.0, 4)):
        v = svt.add(rng, value, 0.3, factor)
        assert (v / svt.step).is_integer()
    assert svt.units <= math.ceil(76.0 / svt.step) + 2


def test_grid_refuses_values_of_2_to_40_steps_at_configuration_and_at_every_draw():
    """Issue 33 section 3: the grid's float argument needs values below ``2**40`` steps; a
    configuration whose bound (periods x users x alpha) can reach it is refused, and so is a
    draw that meets such a value."""
    sensitivity, n = 5.0, 4
    step = grid_step(sensitivity, n)
    check_grid(0.99 * GRID_LIMIT * step, sensitivity, n)
    with pytest.raises(ParameterError, match="not below 2\\*\\*40 steps"):
        check_grid(GRID_LIMIT * step, sensitivity, n)
    # a sum stream: 10 slots per period, the users of its levels, alpha
    check_grid(10 * 9_000 * 50.0, 50.0 * 2, 10 * 1_000)
    with pytest.raises(ParameterError):
        check_grid(10 * 10**9 * 50.0, 50.0 * 2, 10 * 1_000)
    rng = np.random.default_rng(0)
    ok = np.array([0.0, 1.5, 0.99 * GRID_LIMIT * step, -3.0])
    assert np.all(add_noise("geometric", rng, ok, 1.0, sensitivity) / step % 1 == 0)
    with pytest.raises(ParameterError, match="2\\*\\*40 steps"):
        add_noise("geometric", rng, np.array([0.0, -GRID_LIMIT * step, 1.0, 2.0]), 1.0, 5.0)
    svt = ScalarNoise("geometric", sensitivity)
    svt.add(rng, 0.99 * GRID_LIMIT * svt.step, 1.0, 2)
    with pytest.raises(ParameterError, match="2\\*\\*40 steps"):
        svt.add(rng, GRID_LIMIT * svt.step, 1.0, 2)


def test_dft_geometric_release_is_a_low_pass_of_grid_values():
    """At a huge eps only the grid remains: the release is within a few grid steps."""
    m = DFT(d=1, groups=[Group(8, 1e12)], k=5, strict=False)
    x = np.array([3, 5, 9, 4, 1, 7, 8, 2])
    out = [r for c in x for r in m.step([[c]], np.random.default_rng(0))]
    step = grid_step(dft_scale(5, 1, 8, 1.0, 1.0), 2 * 5)
    assert np.allclose([r.histogram[0] for r in out], x, atol=4 * step)


@pytest.mark.parametrize(
    ("cls", "alpha"),
    [
        (OptStream, None),
        (OptStream, 5.0),
        (HierOptStream, None),
        (DFT, None),
        (PeGaSus, None),
        (PeGaSus, 2.5),
    ],
)
def test_period_mechanisms_default_to_geometric_and_never_draw_laplace(cls, alpha):
    """The library default is the safe noise: a whole period runs without one Laplace draw."""

    class NoLaplace:
        def __init__(self) -> None:
            self.rng = np.random.default_rng(4)

        def laplace(self, *args, **kwargs):
            raise AssertionError("floating-point Laplace drawn")

        def geometric(self, *args, **kwargs):
            raise AssertionError("floating-point geometric drawn")

        def integers(self, *args, **kwargs):
            return self.rng.integers(*args, **kwargs)

    m = cls(d=2, groups=[Group(6, 1.0)], alpha=alpha)
    assert m.noise == "geometric"
    rng = NoLaplace()
    counts = [[[40, 7]], [[41, 9]], [[60, 2]], [[38, 8]], [[39, 9]], [[44, 1]]]
    out = [r for c in counts for r in m.step(np.array(c, float if alpha else int), rng)]
    assert len(out) == 6


def test_registry_default_is_geometric():
    assert create("optstream", d=1, groups=[Group(4, 1.0)]).noise == "geometric"
