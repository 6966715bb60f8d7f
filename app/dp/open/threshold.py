"""The selection threshold for discrete Laplace counts, and the noise it is computed for.

Setting (``docs/specs/open-domain.md``, "One slot"). ``Z ~ DL(gamma)``, ``P(Z = z) = (1 - a) /
(1 + a) a**|z|``, ``a = exp(-gamma)``, with ``gamma = eps / Delta`` for a count vector of L1
sensitivity ``Delta``. For ``m >= 1`` the tail is a geometric series:

    P(Z >= m) = (1 - a) / (1 + a) * sum_{z >= m} a**z = a**m / (1 + a).

A key that only the changed user holds has true count 1; it is released when ``1 + Z >= tau``,
with probability ``P(Z >= tau - 1)``. With ``n`` such keys per neighbouring pair (at most
``max_keys`` under add/remove, ``2 max_keys`` under replace: the keys only one side holds), the
union bound gives the slot's delta:

    delta_t = n * a**(tau - 1) / (1 + a),

and the smallest threshold with at most ``delta_t`` is

    tau = 1 + max(1, ceil( ln(delta_t (1 + a) / n) / ln(a) )).

``tau >= 2`` always: at ``tau = 1`` a one-user key would show with probability ``1 / (1 + a)
>= 1/2``.

Exactness. The sampler (:mod:`app.dp.dlaplace`) draws at ``s / 2**k <= gamma``, a slightly
*heavier* tail than ``gamma``'s, so the threshold is computed for the rate actually drawn
(:func:`rate`), and :func:`draw` draws at that very rate. The float estimate of ``tau`` is then
checked with 60-digit decimal arithmetic (correctly rounded ``exp``) and raised until the tail
fits: the rounding can only make ``tau`` larger, never the release probability larger.

>>> r = rate(Fraction(1), 1)
>>> tau = threshold(r, Fraction(1, 10**6), 1)
>>> tau, float(singleton_release(r, tau)) <= 1e-6 < float(singleton_release(r, tau - 1))
(15, True)
"""

from __future__ import annotations

import math
from decimal import Context, Decimal
from fractions import Fraction

import numpy as np

from app.dp import dlaplace
from app.dp.errors import ParameterError
from app.dp.types import IntArray

_DECIMAL = Context(prec=60)


def rate(eps: Fraction, sensitivity: int) -> Fraction:
    """The per-unit rate ``s / 2**k`` the exact sampler draws at for budget ``eps`` and L1
    sensitivity ``sensitivity`` (rounded down from ``eps / sensitivity``)."""
    if eps <= 0 or sensitivity < 1:
        raise ParameterError(f"eps must be > 0 and sensitivity >= 1, got {eps}, {sensitivity}")
    s, k = dlaplace.rational(Fraction(eps) / sensitivity)
    return Fraction(s, 2**k)


def draw(rng: np.random.Generator, gamma: Fraction, size: int) -> IntArray:
    """``size`` exact draws of ``DL(gamma)`` for a rate returned by :func:`rate`."""
    k = gamma.denominator.bit_length() - 1
    if gamma.denominator != 1 << k:
        raise ParameterError(f"gamma must be a dyadic rate from rate(), got {gamma}")
    return dlaplace.sample(rng, gamma.numerator, k, size)


def _a(gamma: Fraction) -> Decimal:
    return _DECIMAL.exp(_DECIMAL.minus(_DECIMAL.divide(gamma.numerator, gamma.denominator)))


def tail(gamma: Fraction, m: int) -> Decimal:
    """``P(Z >= m)`` for ``Z ~ DL(gamma)``, ``m >= 1``, to 60 digits."""
    if m < 1:
        raise ParameterError(f"m must be >= 1, got {m}")
    a = _a(gamma)
    return _DECIMAL.divide(_DECIMAL.power(a, m), _DECIMAL.add(a, 1))


def singleton_release(gamma: Fraction, tau: int) -> Decimal:
    """Probability that a key held by one user passes ``tau`` (``P(1 + Z >= tau)``)."""
    return tail(gamma, tau - 1)


def threshold(gamma: Fraction, delta: Fraction, singletons: int) -> int:
    """The smallest ``tau >= 2`` with ``singletons * P(Z >= tau - 1) <= delta``."""
    if not 0 < delta < 1 or singletons < 1:
        raise ParameterError(f"delta must be in (0, 1) and singletons >= 1, got {delta}")
    a = math.exp(-float(gamma))
    guess = math.ceil(math.log(float(delta) * (1 + a) / singletons) / math.log(a))
    m = max(1, guess - 2)  # below the float guess (off by at most 1); the exact check walks up
    target = _DECIMAL.divide(Decimal(delta.numerator), Decimal(delta.denominator * singletons))
    while tail(gamma, m) > target:
        m += 1
    return m + 1


def mean_abs(gamma: Fraction) -> float:
    """``E|Z|`` for ``Z ~ DL(gamma)``: ``2a / (1 - a**2)`` (a float: it sets a publication
    test, never a budget)."""
    a = math.exp(-float(gamma))
    return 2 * a / (1 - a * a)
