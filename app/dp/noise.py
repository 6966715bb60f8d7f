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
textbook Laplace samplers (Mironov, CCS 2012). It is sampled exactly as the difference of two
i.i.d. geometric variables on {0, 1, ...}.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from typing import Literal

import numpy as np

from app.dp.errors import ParameterError
from app.dp.types import FloatArray, IntArray

NoiseKind = Literal["laplace", "geometric"]
NOISE_KINDS: tuple[NoiseKind, ...] = ("laplace", "geometric")


def check_kind(noise: str) -> NoiseKind:
    """Validate a noise name."""
    if noise not in NOISE_KINDS:
        raise ParameterError(f"noise must be one of {NOISE_KINDS}, got {noise!r}")
    return noise


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
    _check_eps(eps)
    p = -math.expm1(-eps)  # success probability 1 - a, accurate for tiny eps
    # numpy's geometric counts trials (support 1, 2, ...); the difference is the same as for
    # failures (support 0, 1, ...).
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)


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
