"""The selection threshold: a key held by one user is released with probability <= delta_t.

Exactly: the tail ``P(Z >= m) = a**m / (1 + a)`` against the discrete Laplace pmf summed term by
term (60 digits), and the threshold minimal. Empirically: one slot with many keys, each held by
one user, is that many independent trials of the release of a one-user key; the count of
released ones stays below a fixed-seed binomial bound at ``delta_t / singletons`` and agrees
with the exact probability (the sampler's tail is the computed one).
"""

from __future__ import annotations

from decimal import Context, Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.audit.bounds import clopper_pearson_lower, clopper_pearson_upper
from app.dp.errors import ParameterError
from app.dp.open import Level, OpenPBA, OpenUniform
from app.dp.open.threshold import rate, singleton_release, tail, threshold

CONTEXT = Context(prec=60)
CONFIDENCE = 1 - 1e-6
"""Two-sided level of the empirical bounds: a correct sampler fails with probability 1e-6."""


def pmf_tail(gamma: Fraction, m: int, terms: int = 4000) -> Decimal:
    """``sum_{z >= m} P(Z = z)`` term by term, ``P(z) = (1 - a) / (1 + a) a**z``."""
    a = CONTEXT.exp(CONTEXT.minus(CONTEXT.divide(gamma.numerator, gamma.denominator)))
    c = CONTEXT.divide(CONTEXT.subtract(1, a), CONTEXT.add(1, a))
    total, term = Decimal(0), CONTEXT.multiply(c, CONTEXT.power(a, m))
    for _ in range(terms):
        total, term = CONTEXT.add(total, term), CONTEXT.multiply(term, a)
    return total


@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(1, 2), Fraction(1), Fraction(3)])
@pytest.mark.parametrize("m", [1, 2, 7])
def test_closed_form_tail_is_the_pmf_sum(eps, m):
    gamma = rate(eps, 1)
    terms = 4000 if eps >= Fraction(1, 2) else 20000
    assert abs(tail(gamma, m) - pmf_tail(gamma, m, terms)) < Decimal(10) ** -30


@settings(max_examples=150, deadline=None)
@given(
    eps=st.fractions(Fraction(1, 1000), Fraction(20)),
    delta=st.sampled_from([Fraction(1, 10**k) for k in range(3, 12)]),
    singletons=st.integers(1, 12),
)
def test_threshold_bounds_the_one_user_key_release_and_is_minimal(eps, delta, singletons):
    gamma = rate(eps, singletons)
    tau = threshold(gamma, delta, singletons)
    exact_delta = CONTEXT.divide(delta.numerator, delta.denominator)
    assert tau >= 2
    assert CONTEXT.multiply(singletons, singleton_release(gamma, tau)) <= exact_delta
    if tau >= 3:
        assert CONTEXT.multiply(singletons, singleton_release(gamma, tau - 1)) > exact_delta


def test_threshold_uses_the_rate_the_sampler_draws_at():
    """``rate`` rounds ``eps / Delta`` down (a heavier tail); the threshold is for that rate."""
    eps = Fraction(1)
    assert rate(eps, 1) < eps
    assert rate(eps, 1) > eps * (1 - Fraction(1, 2**38))


def test_threshold_refuses_nonsense():
    with pytest.raises(ParameterError, match="delta"):
        threshold(rate(Fraction(1), 1), Fraction(0), 1)


@pytest.mark.parametrize(
    ("cls", "sensitivity", "max_keys"),
    [(OpenUniform, 1, 1), (OpenUniform, 2, 1), (OpenPBA, 1, 2)],
)
def test_one_user_keys_are_released_within_the_delta_share(cls, sensitivity, max_keys):
    """400,000 users, each the only holder of its key: each key's release is an independent
    trial with probability ``q = P(Z >= tau - 1) <= delta_t / (sensitivity * max_keys)``."""
    m = cls(
        levels=[Level(1, 1.0, 1e-3)],
        population=10**6,
        sensitivity=sensitivity,
        max_keys=max_keys,
        max_released_keys=400_000,  # every selected key shows: the cap would cut the count
    )
    n = 400_000
    users = np.arange(n)
    keys = np.char.add("solo-", users.astype(str))
    rng = np.random.default_rng(36)
    r = m.step(users, keys, rng)
    released = int(r.new.sum())
    delta_t = float(r.delta_spent[0])
    assert delta_t == pytest.approx(1e-3)
    eps_sel, _ = m.selection_budget()
    q = float(singleton_release(rate(eps_sel, m.units), m.tau))
    assert q * m.units <= delta_t
    level = 1 - (1 - CONFIDENCE) / 2
    assert clopper_pearson_lower(released, n, level) <= delta_t / m.units  # the bound holds
    lo, hi = clopper_pearson_lower(released, n, level), clopper_pearson_upper(released, n, level)
    assert lo <= q <= hi  # and the sampler's tail is the computed one
    assert released > 0, "no one-user key released: the test has no power"
