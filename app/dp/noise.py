"""Noise for counts: Laplace and exact two-sided geometric, always from an injected generator.

Every sampler takes a :class:`numpy.random.Generator` as its first argument; nothing in the core
holds a global generator. Two constructors build generators at the edge of the system:

* :func:`secure_rng` seeds from the operating system's CSPRNG (production default);
* :func:`keyed_rng` derives the generator from a secret key, a stream id and a slot with
  HMAC-SHA256, so recomputing a slot after a crash reproduces its noise bit for bit, while
  anyone without the key cannot predict it.

``laplace`` reproduces the papers (real-valued releases). ``geometric`` is the discrete Laplace
distribution ``P(k) = (1 - a) / (1 + a) * a**|k|`` with ``a = exp(-eps / sensitivity)`` for
integer sensitivity: its output is an integer count, which closes the floating-point attack on
textbook Laplace samplers (Mironov, CCS 2012). It is sampled exactly, from uniform 64-bit words
and integer comparisons only (:mod:`app.dp.dlaplace`, Canonne, Kamath and Steinke 2020), at the
per-unit budget ``eps / sensitivity`` rounded down to a rational ``s / 2**k`` (by less than
``2**-38`` of it): every integer is a possible output and every ratio between neighbours is
exactly ``exp(s / 2**k) <= exp(eps)``.

Real-valued quantities (a period mechanism's Fourier coefficients, a sum stream's samples, an
SVT's scores) get ``geometric`` noise on a grid (:func:`add_noise`, :class:`ScalarNoise`): the
value is floored onto a grid of step ``g`` (a power of two, :func:`grid_step`) and discrete
Laplace noise in units of ``g`` is added, with the sensitivity rounded up to the grid plus a
slack for the flooring (:func:`grid_units`). Every output is ``g`` times an integer, exactly
representable, and the probability of each output is that of the integer noise, so the ratio
between neighbours is at most ``exp(eps)`` by the integer argument alone. The slack assumes
values below :data:`GRID_LIMIT` steps: :func:`check_grid` refuses a configuration that can
exceed it, and every grid draw refuses a value that does.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from fractions import Fraction
from typing import Literal, cast

import numpy as np

from app.dp import dlaplace, validate
from app.dp.errors import ParameterError
from app.dp.types import FloatArray, IntArray

NoiseKind = Literal["laplace", "geometric"]
NOISE_KINDS: tuple[NoiseKind, ...] = ("laplace", "geometric")
"""The noise kinds, for every mechanism kind. ``geometric`` is DP as implemented (integer
counts: two-sided geometric; real values: two-sided geometric on a grid); ``laplace`` is
numpy's floating-point Laplace, kept to reproduce the papers and not ``eps``-DP in floating
point (docs/audit.md)."""
SAFE_NOISE: NoiseKind = "geometric"
"""The service's noise when a stream names none."""
GRID_RESOLUTION = 64
"""Grid steps per value in one sensitivity: :func:`grid_step` makes ``sensitivity / g`` at least
``GRID_RESOLUTION`` times the number of values, so the flooring slack of :func:`grid_units`
(two steps per value) adds at most ``2 / GRID_RESOLUTION`` (3 %) to the noise."""
GRID_LIMIT = 2**40
"""Grid values stay below this many steps in magnitude: then the floating-point error of
computing them (sums and FFTs of fewer than ``2**10`` terms, 53-bit significands) stays below
half a step, which :func:`grid_units`' slack covers."""


def check_kind(noise: str) -> NoiseKind:
    """Validate a noise name."""
    return cast(NoiseKind, validate.choice("noise", noise, NOISE_KINDS))


def _check_eps(eps: float) -> None:
    if not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"eps must be a finite number > 0, got {eps!r}")


def laplace(
    rng: np.random.Generator, eps: float, size: int, sensitivity: float = 1.0
) -> FloatArray:
    """``size`` draws of Laplace noise with scale ``sensitivity / eps`` (variance ``2 b**2``).

    >>> laplace(np.random.default_rng(7), 1.0, 3).shape
    (3,)
    """
    _check_eps(eps)
    return rng.laplace(0.0, sensitivity / eps, size)


def two_sided_geometric(rng: np.random.Generator, eps: float, size: int) -> IntArray:
    """``size`` draws of discrete Laplace noise for sensitivity 1 at budget ``eps``.

    ``P(k) = (1 - a) / (1 + a) * a**|k|`` with ``a = exp(-eps)``; variance ``2a / (1 - a)**2``.

    >>> two_sided_geometric(np.random.default_rng(7), 1.0, 5).dtype
    dtype('int64')
    """
    return discrete_laplace(rng, eps, 1, (size,))


def discrete_laplace(
    rng: np.random.Generator, eps: float, units: float, shape: tuple[int, ...]
) -> IntArray:
    """Discrete Laplace draws ``P(k) ~ exp(-eps |k| / units)``: noise for an integer quantity of
    L1 sensitivity ``units`` at budget ``eps``.

    Exact (:mod:`app.dp.dlaplace`) at the per-unit budget ``eps / units``, taken as the exact
    rational value of the two floats and rounded down to ``s / 2**k`` (by at least one part in
    ``2**41``, so an ``eps`` that a float conversion rounded up is still covered).

    >>> discrete_laplace(np.random.default_rng(3), 1.0, 4, (2, 3)).shape
    (2, 3)
    """
    _check_eps(eps)
    if not (math.isfinite(units) and units >= 1):
        raise ParameterError(f"units must be a finite number >= 1, got {units!r}")
    s, k = dlaplace.rational(Fraction(eps) / Fraction(units))
    return dlaplace.sample(rng, s, k, math.prod(shape)).reshape(shape)


def grid_step(sensitivity: float, values: int) -> float:
    """``g``: the largest power of two at most ``sensitivity / (GRID_RESOLUTION * values)``, the
    grid of ``values`` real numbers of joint L1 sensitivity ``sensitivity``. A power of two keeps
    ``x / g`` and ``g * n`` exact in floating point.

    >>> grid_step(1.0, 1), grid_step(48.0, 10)
    (0.015625, 0.0625)
    """
    if not (math.isfinite(sensitivity) and sensitivity > 0) or values < 1:
        raise ParameterError(f"grid needs sensitivity > 0 and values >= 1, got {sensitivity!r}")
    _, exponent = math.frexp(sensitivity / (GRID_RESOLUTION * values))
    return math.ldexp(1.0, exponent - 1)


def grid_units(sensitivity: float, values: int, step: float) -> int:
    """The L1 sensitivity, in grid steps, of ``values`` numbers floored onto the grid ``step``.

    Argument: neighbours move the exact values by ``delta_i`` with ``sum |delta_i| <=
    sensitivity``; the computed values carry a floating-point error ``e <= step / 2`` each (the
    assumption of the grid, which :func:`check_grid` and every draw check: values below
    :data:`GRID_LIMIT` steps, computed by sums and FFTs of fewer
    than ``2**10`` terms). ``floor(a) - floor(b) < a - b + 1``, so each floored value moves by
    fewer than ``|delta_i| / step + 2`` steps, and the integer total is at most
    ``ceil(sensitivity / step) + 2 values - 1``; the one step added back covers a
    ``sensitivity`` that its own floating-point product rounded down.

    >>> grid_units(1.0, 1, 0.015625)
    66
    """
    return math.ceil(sensitivity / step) + 2 * values


def check_grid(bound: float, sensitivity: float, values: int) -> None:
    """Refuse, at configuration, ``values`` real numbers of joint L1 ``sensitivity`` that can
    reach ``bound`` in magnitude (for a period stream: slots per period x users x ``alpha``)
    if that is :data:`GRID_LIMIT` grid steps or more.

    >>> check_grid(1e6, 1.0, 10)
    >>> check_grid(1e12, 1.0, 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.dp.errors.ParameterError: grid values up to 1e+12 are 1.02e+15 steps of 0.0009765625, ...
    """
    step = grid_step(sensitivity, values)
    if not (math.isfinite(bound) and abs(bound) / step < GRID_LIMIT):
        raise ParameterError(_beyond_grid(bound, step))


def _beyond_grid(bound: float, step: float) -> str:
    return (
        f"grid values up to {bound:.6g} are {abs(bound) / step:.3g} steps of {step!r}, not below"
        " 2**40 steps: the grid noise would not cover their floating-point error (fewer users,"
        " a smaller alpha or shorter periods)"
    )


def add_noise(
    noise: NoiseKind,
    rng: np.random.Generator,
    values: FloatArray,
    eps: float,
    sensitivity: float,
    *,
    exact: bool = False,
) -> FloatArray:
    """``values`` plus noise at budget ``eps`` for a joint L1 ``sensitivity`` (a new array).

    * ``laplace``: ``Lap(sensitivity / eps)`` per value (the papers; not DP in floating point).
    * ``geometric`` with ``exact=True``: the caller guarantees integer ``values`` (counts and
      their sums) and an integer ``sensitivity``; discrete Laplace with ``units =
      sensitivity`` on the integers, exactly ``eps``-DP.
    * ``geometric`` otherwise: floored onto the grid ``g = grid_step(sensitivity, n)`` plus
      discrete Laplace with ``units = grid_units(sensitivity, n, g)``, in steps of ``g``.

    >>> x = np.array([[3.0, 4.0]])
    >>> add_noise("geometric", np.random.default_rng(0), x, 1e6, 2.0, exact=True).tolist()
    [[3.0, 4.0]]
    >>> y = add_noise("geometric", np.random.default_rng(0), np.array([0.3]), 1.0, 1.0)
    >>> float(y[0] / grid_step(1.0, 1)).is_integer()
    True
    """
    if noise == "laplace":
        return values + rng.laplace(0.0, sensitivity / eps, values.shape)
    if exact:
        if not float(sensitivity).is_integer():
            raise ParameterError(f"exact noise needs an integer sensitivity, got {sensitivity!r}")
        return np.floor(values) + discrete_laplace(rng, eps, sensitivity, values.shape)
    n = max(int(values.size), 1)
    step = grid_step(sensitivity, n)
    units = grid_units(sensitivity, n, step)
    steps = np.floor(values / step)
    if steps.size and not np.abs(steps).max() < GRID_LIMIT:
        raise ParameterError(_beyond_grid(float(np.abs(values).max()), step))
    steps += discrete_laplace(rng, eps, units, values.shape)
    return np.asarray(step * steps, dtype=np.float64)


class ScalarNoise:
    """Noise for the comparisons of a sparse vector technique: one query of L1 sensitivity
    ``sensitivity``, its threshold and its answers on one grid.

    ``add(rng, value, eps, factor)`` is ``value + Lap(factor * sensitivity / eps)`` for
    ``laplace`` and, for ``geometric``, ``g * (floor(value / g) + DL(factor * u, eps))`` with
    ``g = grid_step(sensitivity, 1)`` and ``u = grid_units(sensitivity, 1, g)`` (``factor`` an
    integer). The floored queries move by at most ``u`` steps between neighbours, so the SVT's
    shift argument (Lyu, Su and Li, Thm 2: shift the threshold noise by ``u`` and each positive
    answer's noise by ``2 u``) holds on the integers exactly as for Laplace on the reals.

    >>> s = ScalarNoise("geometric", 2.0)
    >>> s.step, s.units
    (0.03125, 66)
    >>> float(s.add(np.random.default_rng(1), 5.01, 1.0, 2) / s.step).is_integer()
    True
    """

    def __init__(self, noise: NoiseKind, sensitivity: float) -> None:
        self.noise = check_kind(noise)
        self.sensitivity = float(sensitivity)
        self.step = grid_step(self.sensitivity, 1)
        self.units = grid_units(self.sensitivity, 1, self.step)

    def add(self, rng: np.random.Generator, value: float, eps: float, factor: float) -> float:
        """``value`` plus one draw of noise of scale ``factor * sensitivity / eps``."""
        if self.noise == "laplace":
            return float(value + rng.laplace(0.0, factor * self.sensitivity / eps))
        if not float(factor).is_integer():
            raise ParameterError(f"factor must be an integer on the grid, got {factor!r}")
        steps = math.floor(value / self.step)
        if not abs(steps) < GRID_LIMIT:
            raise ParameterError(_beyond_grid(value, self.step))
        noise = int(discrete_laplace(rng, eps, factor * self.units, (1,))[0])
        return self.step * (steps + noise)


def variance(noise: NoiseKind, eps: float, sensitivity: float = 1.0) -> float:
    """The variance of one draw of ``noise`` at budget ``eps``.

    >>> variance("laplace", 0.5), round(variance("geometric", 1.0), 6)
    (8.0, 1.841347)
    """
    _check_eps(eps)
    if noise == "laplace":
        return 2.0 * (sensitivity / eps) ** 2
    a = math.exp(-eps / sensitivity)
    return 2.0 * a / (1.0 - a) ** 2


def perturb(
    noise: NoiseKind, rng: np.random.Generator, values: FloatArray, eps: float
) -> FloatArray:
    """``values`` plus independent noise of sensitivity 1 at budget ``eps`` (a new array)."""
    if noise == "laplace":
        return values + laplace(rng, eps, values.shape[0])
    return values + two_sided_geometric(rng, eps, values.shape[0])


def secure_rng() -> np.random.Generator:
    """A generator seeded with 256 bits from the operating system's CSPRNG."""
    return np.random.default_rng(secrets.randbits(256))


def keyed_rng(key: bytes, stream: str, slot: int, deployment: str = "") -> np.random.Generator:
    """The generator of one slot of one stream: HMAC-SHA256(key, deployment, stream, slot)
    seeds Philox.

    The same (key, deployment, stream, slot) always gives the same generator (a slot
    recomputed after a crash draws the same noise); a different slot, stream, deployment or
    key gives an independent-looking one, so two deployments sharing a key and a stream id
    do not draw the same noise.

    >>> a = keyed_rng(b"k" * 32, "s", 5).random()
    >>> a == keyed_rng(b"k" * 32, "s", 5).random(), a == keyed_rng(b"k" * 32, "s", 6).random()
    (True, False)
    >>> a == keyed_rng(b"k" * 32, "s", 5, deployment="eu").random()
    False
    """
    if len(key) < 16:
        raise ParameterError(f"noise key must be at least 16 bytes, got {len(key)}")
    if slot < 0:
        raise ParameterError(f"slot must be >= 0, got {slot}")
    msg = deployment.encode() + b"\x00" + stream.encode() + b"\x00" + slot.to_bytes(8, "big")
    digest = hmac.new(key, msg, hashlib.sha256).digest()
    return np.random.Generator(np.random.Philox(key=int.from_bytes(digest[:16], "big")))
