"""Clopper-Pearson bounds against scipy's exact binomial interval, and the eps lower bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest

from app.audit.bounds import clopper_pearson_lower, clopper_pearson_upper, eps_lower_bound


@pytest.mark.parametrize(("k", "n"), [(0, 10), (1, 10), (5, 10), (10, 10), (37, 500), (499, 500)])
def test_one_sided_bounds_match_the_exact_two_sided_interval(k, n):
    # a two-sided 95% Clopper-Pearson interval is two one-sided 97.5% bounds
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    assert float(clopper_pearson_lower(k, n, 0.975)) == pytest.approx(ci.low, abs=1e-12)
    assert float(clopper_pearson_upper(k, n, 0.975)) == pytest.approx(ci.high, abs=1e-12)


def test_textbook_interval_five_of_ten():
    # 5/10 at 95%: (0.187, 0.813), as printed in every table of the exact interval
    assert round(float(clopper_pearson_lower(5, 10, 0.975)), 3) == 0.187
    assert round(float(clopper_pearson_upper(5, 10, 0.975)), 3) == 0.813


def test_zero_successes_give_the_rule_of_three():
    # k = 0: upper = 1 - (alpha)^(1/n), about 3.69/n at one-sided 97.5%
    n = 1000
    assert float(clopper_pearson_upper(0, n, 0.975)) == pytest.approx(1 - 0.025 ** (1 / n))


def test_eps_lower_bound_is_the_log_ratio_of_the_bounds_and_vectorizes():
    k_a, k_b = np.array([500, 0, 900]), np.array([50, 50, 0])
    out = eps_lower_bound(k_a, 1000, k_b, 1000, 0.05)
    assert out.shape == (3,)
    assert out[1] == -math.inf  # an event never seen on A certifies nothing
    lo = clopper_pearson_lower(500, 1000, 0.975)
    hi = clopper_pearson_upper(50, 1000, 0.975)
    assert out[0] == pytest.approx(math.log(lo / hi))
    # certain separation at n = 1000 is capped by the sample size: ln(lower(900)/upper(0))
    assert out[2] < math.log(1000)
