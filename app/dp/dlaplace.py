"""Exact discrete Laplace noise from uniform 64-bit words, vectorized over an array.

``DL(gamma)`` is the distribution on the integers with ``P(k) = (1 - a) / (1 + a) * a**|k|``,
``a = exp(-gamma)``. :func:`sample` draws it exactly for a rational ``gamma = s / 2**k``
(:func:`rational`): every decision is a comparison of uniform integers with exact integers, so
the output's law is ``DL(s / 2**k)`` with no floating-point rounding anywhere, its support is
every integer (up to ``2**62``), and every draw ends with probability 1.

Algorithm (Canonne, Kamath and Steinke, "The discrete Gaussian for differential privacy",
NeurIPS 2020, Alg. 2):

1. ``X`` geometric on ``{0, 1, ...}`` with ratio ``exp(-1 / 2**k)``;
2. ``Y = floor(X / s)``, geometric with ratio ``exp(-s / 2**k)`` (a block of ``s`` consecutive
   values of ``X`` has mass proportional to ``exp(-s y / 2**k)``);
3. a fair sign ``B``; ``B = 1, Y = 0`` is rejected and everything is drawn again (zero would
   otherwise come twice as often); else the output is ``(1 - 2B) Y``.

CKS draw ``X = U + 2**k V``: ``U`` uniform on ``[0, 2**k)`` accepted with probability
``exp(-U / 2**k)`` by their Alg. 1, and ``V`` a run of ``Bernoulli(exp(-1))``. Here ``X = H c +
L`` with ``c = 2**(k - J)``, two independent parts:

* ``H``, geometric with ratio ``exp(-2**-J)``, by inversion: ``H = #{m >= 1 : Z < exp(-m /
  2**J)}`` for ``Z`` uniform on ``[0, 1)`` has ``P(H >= m) = exp(-m / 2**J)``. The first 64
  bits ``R`` of ``Z`` are one uniform word, compared with the table ``F[m] = floor(exp(-m / 2**J)
  * 2**64)`` (:func:`table`, built once with exact integer bounds): ``R < F[m]`` proves ``Z <
  exp(-m / 2**J)``, ``R > F[m]`` proves the opposite, and ``R == F[m]`` (probability ``2**-64``
  per entry) reads further words of ``Z`` until the comparison is decided (:func:`_resolve`).
  A float logarithm only guesses the index; the integer comparisons decide.
* ``L``, uniform on ``[0, c)``, accepted with probability ``exp(-L / 2**k)`` by CKS Alg. 1 (a
  rejected ``L`` is drawn again: ``L`` is independent of ``H``): draw ``A_j ~ Bernoulli(L / (j
  2**k))`` for ``j = 1, 2, ...`` until one is 0, and accept if that ``j`` is odd. ``A_1``
  compares a uniform ``W`` on ``[0, 2**k)`` with ``L``; ``W``'s top ``J`` bits come from
  ``L``'s word and are non-zero with probability ``1 - 2**-J``, which accepts at once. ``A_j =
  [uniform on [0, j) is 0] * [uniform on [0, 2**k) < L]``. ``L`` is drawn only where it can
  change ``Y`` (a multiple of ``s`` between ``H c`` and ``H c + c``).

``P(H = h, L = l)`` is proportional to ``exp(-h c / 2**k) exp(-l / 2**k) = exp(-x / 2**k)``, so
``X`` is exactly step 1's geometric. The signs are the bits of one word per 64 attempts. Cost
per attempt: one 64-bit word, plus one for ``L`` where needed (every attempt when ``gamma <=
2**-J``, a fraction ``1 / (2**J gamma)`` above), plus the redraws (``2**-J`` of the ``L``, half
of the zeros). Above ``2**-J``, a first word that proves ``H c + L < s`` gives ``Y = 0`` at
once.

>>> s, k = rational(Fraction(1, 2))
>>> s / 2**k < 0.5, sample(np.random.default_rng(1), s, k, 4).dtype
(True, dtype('int64'))
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import cache

import numpy as np

from app.dp.errors import ParameterError
from app.dp.types import IntArray

J = 8
"""Bits of ``X`` above ``c``: ``H`` is inverted against a table of ``64 * 2**J * ln 2`` entries
(11,357), and a value of ``L`` is rejected with probability below ``2**-J``."""
PRECISION_BITS = 40
"""``s`` keeps at least this many bits of ``gamma``: ``s / 2**k`` is below ``gamma`` by less than
``2**-38`` of it (for ``2**-22 <= gamma <= 2**33``)."""
MAX_K = 62
"""``2**k`` and every intermediate stays in int64."""
MIN_GAMMA = Fraction(1, 2**50)
"""Smaller per-unit budgets (noise scales above ``2**50``) are refused: their draws would not
fit in 64 bits."""
MAX_GAMMA = Fraction(2**33)
"""Larger per-unit budgets are drawn at ``2**33``: the noise is 0 except with probability
``exp(-2**33)``, and a smaller ``gamma`` is only more private."""

_WORD = 2**64
_LOG_WORD = 2**J * 64 * math.log(2)
_TOP_MASK = np.uint64(((1 << J) - 1) << (64 - J))
"""``L``'s word: bits ``0 .. k - J - 1`` are ``L`` (at most 54), bits ``56 .. 63`` the top of
``W``."""


def rational(gamma: Fraction) -> tuple[int, int]:
    """``(s, k)`` with ``s / 2**k <= gamma``: the largest such ``s`` minus one (so a ``gamma``
    that was itself rounded up by a float conversion, by at most a few ulps, is still covered),
    ``k`` as large as keeps ``s`` below ``2**41``.

    >>> rational(Fraction(1, 2))
    (1099511627775, 41)
    """
    if gamma < MIN_GAMMA:
        raise ParameterError(
            f"per-unit budget {float(gamma)!r} below 2**-50: the noise scale would not fit"
        )
    gamma = min(gamma, MAX_GAMMA)
    exponent = gamma.numerator.bit_length() - gamma.denominator.bit_length()  # log2 within 1
    k = min(max(PRECISION_BITS - exponent, J), MAX_K)
    s = math.floor(gamma * 2**k) - 1
    return s, k


# ---------------------------------------------------------------- exact bounds of exp(-m / 2**J)


def _bracket(x: Fraction, bits: int) -> tuple[int, int]:
    """Integers ``lo <= exp(-x) * 2**bits <= hi`` for ``0 < x <= 1``, ``hi - lo <= 2``: partial
    sums of the alternating series, whose terms decrease, bound the sum from both sides."""
    total, term, n = Fraction(1), Fraction(1), 0
    while True:
        n += 1
        term = term * x / n
        previous = total
        total = total - term if n % 2 else total + term
        if term * 2 ** (bits + 2) < 1:
            low, high = (total, previous) if n % 2 else (previous, total)
            return math.floor(low * 2**bits), math.ceil(high * 2**bits)


def _power(m: int, bits: int) -> tuple[int, int]:
    """Integers ``lo <= exp(-m / 2**J) * 2**bits <= hi``, by squaring with directed rounding."""
    guard = bits + 2 * m.bit_length() + 8
    lo1, hi1 = _bracket(Fraction(1, 2**J), guard)
    lo, hi = 1 << guard, 1 << guard
    for bit in bin(m)[2:]:
        lo, hi = (lo * lo) >> guard, -((-hi * hi) >> guard)
        if bit == "1":
            lo, hi = (lo * lo1) >> guard, -((-hi * hi1) >> guard)
    shift = guard - bits
    return lo >> shift, -((-hi) >> shift)


@cache
def table() -> tuple[int, ...]:
    """``F[m] = floor(exp(-m / 2**J) * 2**64)`` for ``m = 0, 1, ...`` up to the first 0
    (``F[0] = 2**64``), from exact integer bounds 128 bits below the word."""
    guard = 192
    lo1, hi1 = _bracket(Fraction(1, 2**J), guard)
    lo, hi = 1 << guard, 1 << guard
    out = [_WORD]
    while out[-1] > 0:
        lo, hi = (lo * lo1) >> guard, -((-hi * hi1) >> guard)
        low, high = lo >> (guard - 64), hi >> (guard - 64)
        if low != high:  # a bound within 2**-128 of an integer: never for J = 8
            raise ArithmeticError("table entry not decided at 192 bits")
        out.append(low)
    return tuple(out)


@cache
def _arrays() -> tuple[np.ndarray, np.ndarray, frozenset[int]]:
    """The table as uint64: ``below[m] = F[m] - 1`` (``2**64 - 1`` at 0) and ``F`` itself."""
    f = table()
    below = np.array([min(max(v - 1, 0), _WORD - 1) for v in f], dtype=np.uint64)
    return below, np.array(f[1:] + (0,), dtype=np.uint64), frozenset(f)


def _word(rng: np.random.Generator) -> int:
    return int(rng.integers(0, _WORD, dtype=np.uint64))


def _resolve(rng: np.random.Generator, r: int) -> int:
    """``H`` for a first word ``r`` that the table does not decide: read more words of ``Z``
    (Python integers) until ``Z``'s interval lies between two consecutive ``exp(-m / 2**J)``."""
    f = table()
    if r not in f:  # decided, only the float guess missed it
        return len(f) - 1 - bisect.bisect_right(f[::-1], r)
    num, bits = r, 64
    while True:
        num, bits = (num << 64) | _word(rng), bits + 64
        if num == 0:
            continue
        guess = math.floor(-(1 << J) * (math.log(num) - bits * math.log(2)))
        for m in (guess - 1, guess, guess + 1):
            if m < 0:
                continue
            _, above = _power(m + 1, bits + 64)  # exp(-(m + 1) / 2**J) * 2**(bits + 64)
            within, _ = _power(m, bits + 64)
            if above <= num << 64 and within >= (num + 1) << 64:
                return m


def _high(rng: np.random.Generator, r: np.ndarray) -> IntArray:
    """``H`` (geometric with ratio ``exp(-2**-J)``) for the first words ``r`` of ``Z``."""
    below, after, _ = _arrays()
    # -2**J ln(Z) with Z ~ (r + 1/2) / 2**64: only a guess, checked against the table
    guess: IntArray = (_LOG_WORD - (1 << J) * np.log(r.astype(np.float64) + 0.5)).astype(np.int64)
    np.minimum(guess, len(below) - 2, out=guess)
    decided = (r <= below[guess]) & (r > after[guess])  # F[m + 1] < r < F[m]
    if not decided.all():
        for i in np.flatnonzero(~decided):
            guess[i] = _resolve(rng, int(r[i]))
    return guess


def _rejected(rng: np.random.Generator, low: IntArray, k: int) -> np.ndarray:
    """CKS Alg. 1 after ``A_1 = 1``: whether ``exp(-L / 2**k)`` rejects each ``L`` (the first
    ``j`` with ``A_j = 0`` is even)."""
    rejected = np.zeros(low.size, dtype=bool)
    alive = np.arange(low.size)
    j = 1
    while alive.size:
        j += 1
        a = (rng.integers(0, j, size=alive.size) == 0) & (
            rng.integers(0, 2**k, size=alive.size, dtype=np.int64) < low[alive]
        )
        if j % 2 == 0:
            rejected[alive[~a]] = True
        alive = alive[a]
    return rejected


def _low(rng: np.random.Generator, n: int, k: int) -> IntArray:
    """``n`` independent draws of ``L`` on ``[0, 2**(k - J))`` with mass ``~ exp(-L / 2**k)``:
    uniform, kept by CKS Alg. 1, drawn again where it rejects."""
    width = k - J
    w = rng.integers(0, _WORD, size=n, dtype=np.uint64)
    low = (w & np.uint64((1 << width) - 1)).astype(np.int64)
    open_ = np.flatnonzero((w & _TOP_MASK) == 0)  # W < 2**width: A_1 compares the rest with L
    if open_.size:
        a1 = rng.integers(0, 1 << width, size=open_.size, dtype=np.int64) < low[open_]
        again = open_[a1][_rejected(rng, low[open_[a1]], k)]
        if again.size:
            low[again] = _low(rng, again.size, k)
    return low


def _magnitudes(rng: np.random.Generator, r: np.ndarray, s: int, k: int) -> IntArray:
    """``Y = floor((H c + L) / s)`` for the first words ``r`` of ``Z``.

    ``L`` is drawn only where it can change ``Y``: where ``floor(H c / s)`` and ``floor((H c + c
    - 1) / s)`` agree, ``Y`` is the same for every ``L`` (``L`` is independent of the rest)."""
    width = k - J
    c = 1 << width
    high = _high(rng, r)
    if high.max(initial=0) >= len(table()):  # beyond the table (2**-64 per attempt): Python
        low = _low(rng, r.size, k)
        exact = [(int(h) << width) + int(v) for h, v in zip(high, low, strict=True)]
        if max(exact) // s >= 2**62:
            raise OverflowError("a discrete Laplace draw beyond 2**62")
        return np.array([x // s for x in exact], dtype=np.int64)
    if c >= s:  # floor((h c + l) / s) without forming h c
        quotient, remainder = divmod(c, s)  # c = quotient * s + remainder
        y: IntArray = high * quotient + (high * remainder + _low(rng, r.size, k)) // s
        return y
    base = high * c
    y = base // s
    split = np.flatnonzero((base + (c - 1)) // s != y)  # a multiple of s in (h c, h c + c)
    if split.size:
        y[split] = (base[split] + _low(rng, split.size, k)) // s
    return y


def _attempts(rng: np.random.Generator, s: int, k: int, n: int) -> tuple[IntArray, np.ndarray]:
    """``n`` independent attempts of CKS Alg. 2: the values and whether each is accepted (not a
    negative zero). The accepted ones are i.i.d. ``DL(s / 2**k)``.

    The signs are the bits of ``ceil(n / 64)`` further words. When ``c < s``, a first word above
    ``F[q]``, ``q = floor(s / c)``, proves ``H < q``, so ``Y = 0`` with no more work (most
    attempts at a large ``gamma``)."""
    c = 1 << (k - J)
    words = rng.integers(0, _WORD, size=n + -(-n // 64), dtype=np.uint64)
    bits = (words[n:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    negative = bits.ravel()[:n].astype(np.int64)
    r = words[:n]
    some = None
    if c < s:
        f = table()
        some = np.flatnonzero(r <= np.uint64(f[min(s // c, len(f) - 1)]))
    if some is None or 2 * some.size > n:  # not worth the indexing
        y = _magnitudes(rng, r, s, k)
    else:
        y = np.zeros(n, dtype=np.int64)
        y[some] = _magnitudes(rng, r[some], s, k)
    accepted = (y != 0) | (negative == 0)
    return (y ^ -negative) + negative, accepted  # two's complement: -y where negative


def sample(rng: np.random.Generator, s: int, k: int, size: int) -> IntArray:
    """``size`` independent draws of ``DL(s / 2**k)`` (int64), ``1 <= s < 2**42``, ``J <= k <=
    MAX_K``: the first ``size`` accepted of enough attempts (more are drawn while too few).

    >>> sample(np.random.default_rng(0), *rational(Fraction(10**6)), 5).tolist()
    [0, 0, 0, 0, 0]
    """
    if not (1 <= s < 2**42 and J <= k <= MAX_K and (1 << (k - J)) // s < 2**42):
        raise ParameterError(f"discrete Laplace needs 1 <= s < 2**42, {J} <= k <= {MAX_K}")
    rate = -math.expm1(-s / 2**k) / 2  # a negative zero: half of P(Y = 0)
    out = np.empty(size, dtype=np.int64)
    filled = 0
    while filled < size:
        need = size - filled
        n = math.ceil(need / (1 - rate) + 4 * math.sqrt(need * rate)) + 8
        values, accepted = _attempts(rng, s, k, n)
        got = values[accepted][:need]
        out[filled : filled + got.size] = got
        filled += got.size
    return out
