"""Issue 33 section 3: the discrete Laplace sampler is exact (:mod:`app.dp.dlaplace`).

Exact parts are checked exactly: the inversion table against Python's correctly rounded decimal
``exp``, the tie-breaking of a word equal to a table entry, the rounding of the budget, Alg. 1's
control flow on scripted words. The whole sampler is checked against the closed-form pmf with
chi-square tests (fixed seeds; each also rejects a budget 5 % off), and its tail beyond the
float sampler's bound (``[-72, 72]`` at a per-unit budget of 0.5) both on a scripted word and
at its expected rate.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from app.dp import dlaplace
from app.dp.errors import ParameterError
from app.dp.noise import discrete_laplace, keyed_rng, two_sided_geometric

N = 200_000
CHI2_ALPHA = 1e-3  # a correct sampler fails one chi-square test with this probability
Z = 5.0  # binomial tolerance in standard deviations (one test fails with probability ~6e-7)


def exp_floor(m: int, scale_bits: int = 64) -> int:
    """``floor(exp(-m / 2**J) * 2**scale_bits)`` from decimal at 80 digits (correctly rounded
    exp: exact unless the value lies within 1e-60 of an integer)."""
    with localcontext() as ctx:
        ctx.prec = 80
        value = (Decimal(-m) / (1 << dlaplace.J)).exp() * (1 << scale_bits)
        return int(value.to_integral_value(rounding="ROUND_FLOOR"))


class Scripted:
    """A generator that returns given words, in order, from ``integers``."""

    def __init__(self, *words: int) -> None:
        self.words = list(words)

    def integers(self, low, high=None, size=None, dtype=np.int64):
        if size is None:
            return dtype(self.words.pop(0))
        return np.array([self.words.pop(0) for _ in range(size)], dtype=dtype)


def dl_pmf(k: np.ndarray, gamma: float) -> np.ndarray:
    a = math.exp(-gamma)
    return (1 - a) / (1 + a) * a ** np.abs(k)


def chi_square_p(x: np.ndarray, gamma: float) -> float:
    """p-value of x against DL(gamma), bins of expected count >= 5, tails pooled."""
    a = math.exp(-gamma)
    kmax = max(int(math.log(5 * (1 + a) / ((1 - a) * x.size)) / math.log(a)), 0)
    ks = np.arange(-kmax, kmax + 1)
    expected = dl_pmf(ks, gamma) * x.size
    tail = (x.size - expected.sum()) / 2
    counts = np.bincount(np.clip(x, -kmax - 1, kmax + 1) + kmax + 1, minlength=2 * kmax + 3)
    return float(stats.chisquare(counts, [tail, *expected, tail]).pvalue)


# ------------------------------------------------------------------------------- exact parts


def test_table_is_floor_of_exp_for_every_entry():
    f = dlaplace.table()
    assert f[0] == 2**64 and f[-1] == 0 and f[-2] > 0
    assert len(f) - 1 == math.ceil(64 * math.log(2) * 2**dlaplace.J)  # up to exp(-m/2**J) < 2**-64
    assert all(f[m] == exp_floor(m) for m in range(1, len(f)))
    assert all(a >= b for a, b in zip(f, f[1:], strict=False))
    assert f.count(1) > 1  # the last entries: a word of 1 ties with several (read on)


@pytest.mark.parametrize("m", [0, 1, 7, 300, 5000, 11_000])
def test_power_bounds_bracket_exp(m):
    lo, hi = dlaplace._power(m, 200)
    exact = exp_floor(m, 200)
    assert lo <= exact <= hi and hi - lo < 2**8


def test_untied_words_invert_exactly():
    """For random words (and the extremes), ``H`` is the number of entries above the word: the
    float guess never decides, the integer comparisons do."""
    f = dlaplace.table()
    r = np.random.default_rng(5).integers(0, 2**64, size=20_000, dtype=np.uint64)
    r = np.concatenate([r, np.array([2, 2**64 - 1, f[1] + 1, f[1] - 1], dtype=np.uint64)])
    r = r[~np.isin(r, np.array(f[1:], dtype=np.uint64))]
    h = dlaplace._high(Scripted(), r)  # no tie: no further word read
    expected = [sum(1 for v in f[1:] if v > int(w)) for w in r[-4:]]
    assert h[-4:].tolist() == expected
    order = np.argsort(r)  # H is non-increasing in the word, and exact at every step
    assert np.all(np.diff(h[order]) <= 0)
    assert all(f[m] > int(w) > f[m + 1] for m, w in zip(h, r, strict=True))


@pytest.mark.parametrize("m", [1, 2, 255, 4000, 11_356])
@pytest.mark.parametrize("second", [0, 2**63, 2**64 - 1, 12345678901234567])
def test_a_word_equal_to_an_entry_reads_on_until_decided(m, second):
    """``R == F[m]``: the next word decides ``Z < exp(-m / 2**J)`` exactly (decimal at 80
    digits computes what it must be)."""
    f = dlaplace.table()
    h = int(dlaplace._high(Scripted(second, 2**63, 2**63), np.array([f[m]], np.uint64))[0])
    num = (f[m] << 64) | second  # Z in [num, num + 1) / 2**128
    assert exp_floor(h + 1, 128) < num and num + 1 <= exp_floor(h, 128)


def test_a_zero_word_reads_on_into_the_far_tail():
    """``R == 0`` (``Z < 2**-64``): ``H`` goes past the table, exactly."""
    words = (3, 2**63, 2**63, 2**63)  # Z ~ 3.5 * 2**-128
    h = int(dlaplace._high(Scripted(*words), np.array([0], np.uint64))[0])
    assert h >= len(dlaplace.table())
    num = (3 << 64) | 2**63  # Z in [num, num + 1) / 2**192
    assert exp_floor(h + 1, 192) < num and num + 1 <= exp_floor(h, 192)


@settings(max_examples=300, deadline=None)
@given(
    st.fractions(
        min_value=Fraction(1, 2**22), max_value=Fraction(2**33), max_denominator=2**70
    ).filter(lambda g: g > 0)
)
def test_rational_budget_rounds_down_by_less_than_2_to_minus_38(gamma):
    s, k = dlaplace.rational(gamma)
    assert Fraction(s, 2**k) < gamma
    assert Fraction(s, 2**k) > gamma * (1 - Fraction(1, 2**38))
    assert 1 <= s < 2**42 and dlaplace.J <= k <= dlaplace.MAX_K


def test_rational_budget_extremes():
    s, k = dlaplace.rational(Fraction(1, 2**50))
    assert 0 < Fraction(s, 2**k) < Fraction(1, 2**50)
    s, k = dlaplace.rational(Fraction(10**30))
    assert Fraction(s, 2**k) <= dlaplace.MAX_GAMMA  # only stricter
    with pytest.raises(ParameterError, match="below 2\\*\\*-50"):
        dlaplace.rational(Fraction(1, 2**51))


def test_float_eps_is_covered_after_its_own_rounding():
    """A budget the float conversion rounded up by one ulp still bounds the drawn budget."""
    for eps in (0.1, 0.6, 1 / 3, 0.025, 1e-7):
        s, k = dlaplace.rational(Fraction(eps))
        assert Fraction(s, 2**k) < Fraction(eps) * (1 - Fraction(1, 2**52))


def test_alg1_control_flow_on_scripted_words():
    """``L`` is rejected iff the first ``j`` with ``A_j = 0`` is even (CKS Alg. 1)."""
    k, low = 20, np.array([5], np.int64)
    # A_2 = [u(0, 2) == 0] * [u(0, 2**k) < L]
    assert dlaplace._rejected(Scripted(1, 0), low, k).tolist() == [True]  # A_2 = 0: j = 2
    assert dlaplace._rejected(Scripted(0, 9), low, k).tolist() == [True]  # A_2 = 0 (9 >= 5)
    # A_2 = 1, A_3 = 0: j = 3, accepted
    assert dlaplace._rejected(Scripted(0, 4, 2, 0), low, k).tolist() == [False]
    # A_2 = A_3 = 1, A_4 = 0: rejected
    assert dlaplace._rejected(Scripted(0, 4, 0, 1, 3, 0), low, k).tolist() == [True]


@pytest.mark.parametrize("x", [0.25, 0.5, 0.999])
def test_alg1_acceptance_rate_after_a_first_success(x):
    """Given ``A_1 = 1`` Alg. 1 accepts with probability ``(exp(-x) - 1 + x) / x``."""
    k = 30
    low = np.full(N, int(x * 2**k), np.int64)
    rejected = dlaplace._rejected(np.random.default_rng(6), low, k)
    p = 1 - (math.exp(-x) - 1 + x) / x
    assert abs(rejected.mean() - p) < Z * math.sqrt(p * (1 - p) / N)


def test_attempt_word_layout():
    """The first word is ``Z``'s, the second holds the signs (bit ``i`` for attempt ``i``);
    then ``L``'s word: ``L`` in the low bits, ``W``'s top in bits 56..63. A closed gate accepts
    ``L``, an open one runs Alg. 1 and a rejected ``L`` is drawn again; -0 is rejected."""
    s, k = 2**30, 40  # gamma = 2**-10: c = 2**32 >= s, L always drawn
    r_three = int(dlaplace.table()[3]) - 1  # H = 3
    gate = 1 << 56
    values, accepted = dlaplace._attempts(Scripted(r_three, 0b10, gate | 7), s, k, 1)
    assert accepted.tolist() == [True] and values.tolist() == [(3 * 2**32 + 7) // s]
    values, accepted = dlaplace._attempts(Scripted(r_three, 0b01, gate | 7), s, k, 1)
    assert accepted.tolist() == [True] and values.tolist() == [-((3 * 2**32 + 7) // s)]
    values, accepted = dlaplace._attempts(Scripted(2**64 - 1, 1, gate), s, k, 1)
    assert accepted.tolist() == [False] and values.tolist() == [0]  # -0
    # gate open, W = 3 < L = 7: A_1 = 1; A_2 = 0 rejects; L drawn again: 2**32 - 1
    words = (r_three, 0, 7, 3, 1, 0, gate | (2**32 - 1))
    values, accepted = dlaplace._attempts(Scripted(*words), s, k, 1)
    assert accepted.tolist() == [True] and values.tolist() == [(4 * 2**32 - 1) // s]


def test_l_is_drawn_only_where_it_can_change_y():
    """``gamma = 1/2``: ``c = 2**33``, ``s ~ 2**40``; ``H = 3`` spans no multiple of ``s`` (no
    word for ``L`` read), ``H = 127`` does (``127 c < s <= 128 c - 1``: ``L`` read and used)."""
    s, k = dlaplace.rational(Fraction(1, 2))
    f = dlaplace.table()
    values, _ = dlaplace._attempts(Scripted(f[3] - 1, 0), s, k, 1)
    assert values.tolist() == [0]
    for low, y in ((0, 0), (2**33 - 1, 1)):
        values, _ = dlaplace._attempts(Scripted(f[127] - 1, 0, 1 << 56 | low), s, k, 1)
        assert values.tolist() == [(127 * 2**33 + low) // s] == [y]


# ------------------------------------------------------------------------------- the law


@pytest.mark.parametrize(("s", "k"), [(3, 11), (5, 9), (40, 12), (1, 8), (7, 8)])
def test_the_parts_compose_to_discrete_laplace_exactly(s, k):
    """The sampler's pmf from the laws of its parts (each checked exactly above): ``H``
    geometric with ratio ``exp(-2**-J)``, ``L`` on ``[0, c)`` with mass ``~ exp(-l / 2**k)``
    (Alg. 1), ``Y = floor((H c + L) / s)``, a fair sign with -0 rejected; at 60 digits it is
    ``DL(s / 2**k)`` for ``|k| <= 12``, ``c`` and ``s`` coprime or not."""
    with localcontext() as ctx:
        ctx.prec = 60
        c = 1 << (k - dlaplace.J)
        a1 = (Decimal(-1) / (1 << k)).exp()
        ac = a1**c
        p_low = [a1**v for v in range(c)]
        norm = sum(p_low)

        def p_y(y: int) -> Decimal:
            return sum(
                (1 - ac) * ac ** (x // c) * p_low[x % c] / norm for x in range(y * s, y * s + s)
            )

        zero = p_y(0)
        kept = 1 - zero / 2
        a = (Decimal(-s) / (1 << k)).exp()
        for value in range(-12, 13):
            mass = p_y(abs(value)) / 2 / kept  # one sign of Y (B = 0 at Y = 0)
            assert abs(mass - (1 - a) / (1 + a) * a ** abs(value)) < Decimal(10) ** -50


@pytest.mark.slow
@pytest.mark.parametrize("gamma", [0.05, 0.5, 1.0, 3.0])
def test_pmf_chi_square_and_power(gamma):
    x = two_sided_geometric(np.random.default_rng(7), gamma, N)
    assert chi_square_p(x, gamma) > CHI2_ALPHA
    for off in (0.95, 1.05):  # the same test rejects a budget 5 % off
        assert chi_square_p(x, gamma * off) < CHI2_ALPHA


@pytest.mark.slow
@pytest.mark.parametrize("units", [40.0, 4096.0])
def test_wide_noise_moments(units):
    """Large scales (``c`` spans several blocks of ``s``): mean 0 and variance
    ``2a / (1 - a)**2`` within 99.9 % CLT intervals."""
    x = discrete_laplace(np.random.default_rng(8), 0.5, units, (N,)).astype(np.float64)
    a = math.exp(-0.5 / units)
    var = 2 * a / (1 - a) ** 2
    mu4 = 2 * a * (1 + 11 * a + 11 * a**2 + a**3) / ((1 + a) * (1 - a) ** 4)  # E[K**4]
    assert abs(x.mean()) < 3.3 * math.sqrt(var / N)
    assert abs(x.var() - var) < 3.3 * math.sqrt((mu4 - var**2) / N)


def test_tail_beyond_the_float_bound_on_a_scripted_word():
    """At a per-unit budget of 0.5 numpy's float geometric never leaves ``[-72, 72]``; the
    exact sampler reaches ``|k| = 86`` when ``Z = 2.5 * 2**-64`` (first word 2, a tie, then
    ``2**63``), and beyond 120 when ``Z ~ 2**-88`` (first word 0, then ``2**40``)."""
    s, k = dlaplace.rational(Fraction(1, 2))
    gate = 1 << 56  # W's top bits non-zero: L = 0 accepted at once
    x, accepted = dlaplace._attempts(Scripted(2, 1, 2**63, gate), s, k, 1)
    with localcontext() as ctx:
        ctx.prec = 80
        z = Decimal((2 << 64) | 2**63) / Decimal(2) ** 128
        h = int((-(z.ln()) * (1 << dlaplace.J)).to_integral_value(rounding="ROUND_FLOOR"))
    assert accepted[0] and x[0] == -((h << (k - dlaplace.J)) // s) == -86
    x, accepted = dlaplace._attempts(Scripted(0, 0, 2**40, gate), s, k, 1)
    assert accepted[0] and x[0] > 120


@pytest.mark.slow
def test_tail_rate_far_beyond_72():
    """At a small per-unit budget the exact tail ``P(|K| > t) = 2 a**(t + 1) / (1 + a)``."""
    gamma, n = 0.02, 1_000_000
    x = two_sided_geometric(np.random.default_rng(9), gamma, n)
    a = math.exp(-gamma)
    for t in (72, 216, 360):
        p = 2 * a ** (t + 1) / (1 + a)
        assert abs((np.abs(x) > t).mean() - p) < Z * math.sqrt(p * (1 - p) / n)


def test_keyed_noise_replays_a_slot():
    """The noise is a function of (key, deployment, stream, slot): recomputed, it is equal."""

    def slot(t: int) -> np.ndarray:
        return discrete_laplace(keyed_rng(b"k" * 32, "views", t, "eu"), 0.1, 2, (3, 1000))

    assert np.array_equal(slot(41), slot(41))
    assert not np.array_equal(slot(41), slot(42))


def test_huge_budget_draws_zero_and_tiny_budget_is_refused():
    assert not discrete_laplace(np.random.default_rng(1), 1e12, 1, (1000,)).any()
    with pytest.raises(ParameterError, match="2\\*\\*-50"):
        discrete_laplace(np.random.default_rng(1), 1e-9, 2**30, (3,))


@settings(max_examples=300, deadline=None)
@given(
    st.fractions(min_value=Fraction(1, 2**50), max_value=Fraction(2**34), max_denominator=2**80),
    st.integers(2, 2**64 - 1),
    st.integers(0, 2**64 - 1),
    st.integers(0, 2**64 - 1),
)
def test_attempt_is_the_exact_integer_formula(gamma, r, signs, w):
    """Over the whole budget range (``s`` down to ``2**12``, ``k`` up to 62), an attempt's value
    is ``(1 - 2B) floor((H c + L) / s)`` computed in Python integers, ``H`` the entries above
    the first word, ``B`` bit 0 of the second, ``L`` from the third."""
    f = dlaplace.table()
    while r in f:  # ties read further words: tested above
        r += 1
    s, k = dlaplace.rational(gamma)
    width = k - dlaplace.J
    w |= 1 << 56  # gate closed: L accepted
    values, accepted = dlaplace._attempts(Scripted(r, signs, w), s, k, 1)
    h = sum(1 for v in f[1:] if v > r)
    y = ((h << width) + (w & ((1 << width) - 1))) // s  # L read only if it matters
    negative = signs & 1
    assert values[0] == (-y if negative else y)
    assert accepted[0] == (y != 0 or not negative)
