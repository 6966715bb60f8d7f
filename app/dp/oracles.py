"""Local-DP frequency oracles: a device perturbs its value, the service estimates frequencies.

Three pure protocols (Wang et al., USENIX Security 2017), each an object built from the domain
size ``d`` and the budget ``eps`` of one report:

* :class:`GRR`, generalized randomized response: report ``y in [d]``; keep the true value with
  probability ``p = e^eps / (e^eps + d - 1)``, else send one of the ``d - 1`` others uniformly
  (LDP-IDS Eq. 1). A report is one integer.
* :class:`OUE`, optimized unary encoding: report ``d`` bits; the true value's bit is 1 with
  probability ``1/2``, every other bit with ``q = 1 / (e^eps + 1)``.
* :class:`OLH`, optimized local hashing: the device draws a hash ``H`` from a universal family
  into ``g = round(e^eps) + 1`` cells and reports ``(H, GRR_g(H(v)))``; the service counts, for
  each value ``k``, the reports with ``H(k) == y``. ``H(v) = ((a v + b) mod P) mod g`` with
  ``P = 2**31 - 1`` and the seed ``(a, b)`` sent along.

In each protocol a report *supports* value ``k`` with probability ``p`` if the user holds ``k``
and ``q`` otherwise. The service only needs the support counts ``C[k]`` and the number of
reports ``n``: ``c[k] = (C[k] / n - q) / (p - q)`` is unbiased, with variance (Wang et al. Eq. 3)

    Var c[k] = q (1 - q) / (n (p - q)**2) + f_k (1 - p - q) / (n (p - q)),

where ``f_k`` is the true frequency. Averaged over the ``d`` values (``sum f_k = 1``) this is
:meth:`FrequencyOracle.mean_variance`, the ``V(eps, n)`` the LDP-IDS mechanisms use for both the
dissimilarity correction and the publication error (spec ``seed-004`` A2: the exact average).

Report arrays (device side, vectorized over a cohort): GRR ``(n,)`` ints, OUE ``(n, d)`` bools,
OLH ``(n, 3)`` ints ``[a, b, y]``. :meth:`FrequencyOracle.support` turns a batch into support
counts without a Python loop over reports. :func:`choose` is the usual adaptive choice: GRR
when ``d < 3 e^eps + 2`` (its variance is then the smaller), else OUE (spec §2.4).

>>> import numpy as np
>>> o = GRR(d=2, eps=1.0)
>>> round(o.p, 4), round(o.q, 4)
(0.7311, 0.2689)
>>> reports = o.perturb(np.zeros(10_000, dtype=np.int64), np.random.default_rng(1))
>>> o.estimate(o.support(reports), reports.shape[0]).round(2).tolist()
[0.99, 0.01]
>>> f"{GRR(2, 1 / 20).mean_variance(200_000):.5e}", f"{GRR(2, 1.0).mean_variance(10_000):.4e}"
('1.99958e-03', '9.2067e-05')
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.errors import ParameterError
from app.dp.types import FloatArray, IntArray

OracleName = Literal["grr", "oue", "olh"]
ORACLES: tuple[OracleName, ...] = ("grr", "oue", "olh")
CHOICES: tuple[str, ...] = (*ORACLES, "adaptive")
"""What a mechanism's ``oracle`` parameter accepts."""

PRIME = 2**31 - 1
"""The modulus of OLH's universal hash family."""

Reports = npt.NDArray[Any]
Payload = tuple[int, ...]


class FrequencyOracle(ABC):
    """A pure LDP frequency oracle for domain ``[d]`` at budget ``eps`` per report."""

    name: ClassVar[OracleName]

    def __init__(self, d: int, eps: float) -> None:
        self.d = validate.integer("d", d, 2)
        self.eps = validate.positive("eps", eps)

    @property
    @abstractmethod
    def p(self) -> float:
        """Probability that a report supports the reporter's own value."""

    @property
    @abstractmethod
    def q(self) -> float:
        """Probability that a report supports a given other value."""

    @abstractmethod
    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> Reports:
        """Device side: one ``eps``-LDP report per value in ``[0, d)``, drawn from ``rng``."""

    @abstractmethod
    def support(self, reports: Reports) -> IntArray:
        """Service side: how many of ``reports`` support each value, shape ``(d,)``."""

    @abstractmethod
    def payloads(self, reports: Reports) -> list[Payload]:
        """One plain tuple per report, as a device sends it."""

    @abstractmethod
    def from_payloads(self, payloads: list[Payload]) -> Reports:
        """The report array of a list of payloads (inverse of :meth:`payloads`)."""

    def _values(self, values: npt.ArrayLike) -> IntArray:
        v = np.asarray(values)
        if v.ndim != 1 or (v.size and (not np.issubdtype(v.dtype, np.integer))):
            raise ParameterError(f"values must be a 1-d integer array, got {v.dtype} {v.shape}")
        if v.size and (v.min() < 0 or v.max() >= self.d):
            raise ParameterError(f"values must lie in [0, d={self.d})")
        return v.astype(np.int64)

    def sample_support(self, counts: npt.ArrayLike, rng: np.random.Generator) -> IntArray | None:
        """Support counts of reports from users with true ``counts`` per value, drawn in
        aggregate with the law of :meth:`perturb` then :meth:`support` (spec §7.9), or None
        where no exact aggregate law is implemented (OLH)."""
        return None

    def estimate(self, support: npt.ArrayLike, n: int) -> FloatArray:
        """Unbiased frequencies from support counts of ``n`` reports (zeros if ``n == 0``)."""
        s = np.asarray(support, dtype=np.float64)
        if s.shape != (self.d,):
            raise ParameterError(f"support must have shape ({self.d},), got {s.shape}")
        if n <= 0:
            return np.zeros(self.d)
        return (s / n - self.q) / (self.p - self.q)

    def variance(self, n: int, f: npt.ArrayLike) -> FloatArray:
        """Variance of each estimated frequency from ``n`` reports when the truth is ``f``."""
        p, q = self.p, self.q
        fa = np.asarray(f, dtype=np.float64)
        if n <= 0:
            return np.full(fa.shape, math.inf)
        return q * (1 - q) / (n * (p - q) ** 2) + fa * (1 - p - q) / (n * (p - q))

    def mean_variance(self, n: int) -> float:
        """``V(eps, n)``: the variance averaged over the ``d`` values (``inf`` if ``n == 0``)."""
        if n <= 0:
            return math.inf
        p, q = self.p, self.q
        return q * (1 - q) / (n * (p - q) ** 2) + (1 - p - q) / (self.d * n * (p - q))

    @abstractmethod
    def accepts(self, payload: Sequence[int]) -> bool:
        """Whether ``payload`` is a report this oracle could have sent (the service checks
        every report with it before counting)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(d={self.d}, eps={self.eps!r})"


class GRR(FrequencyOracle):
    """Generalized randomized response (LDP-IDS Eq. 1); a report is one value."""

    name = "grr"

    def accepts(self, payload: Sequence[int]) -> bool:
        """One value of the domain.

        >>> GRR(4, 1.0).accepts([3]), GRR(4, 1.0).accepts([4])
        (True, False)
        """
        return len(payload) == 1 and 0 <= payload[0] < self.d

    @property
    def p(self) -> float:
        return math.exp(self.eps) / (math.exp(self.eps) + self.d - 1)

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.eps) + self.d - 1)

    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> Reports:
        v = self._values(values)
        keep = rng.random(v.shape[0]) < self.p
        other = np.asarray(rng.integers(0, self.d - 1, v.shape[0]), dtype=np.int64)
        other += other >= v  # uniform over the d - 1 values other than v
        return np.where(keep, v, other).astype(np.int64)

    def sample_support(self, counts: npt.ArrayLike, rng: np.random.Generator) -> IntArray | None:
        c = np.asarray(counts, dtype=np.int64)
        kept = rng.binomial(c, self.p)
        out = np.asarray(kept, dtype=np.int64).copy()
        others = np.full(self.d - 1, 1.0 / (self.d - 1))
        for k in range(self.d):  # a loop over values, not reports
            moved = rng.multinomial(int(c[k] - kept[k]), others)
            out[np.arange(self.d) != k] += moved
        return out

    def support(self, reports: Reports) -> IntArray:
        counts: IntArray = np.bincount(np.asarray(reports, dtype=np.int64), minlength=self.d)
        return counts[: self.d]

    def payloads(self, reports: Reports) -> list[Payload]:
        return [(int(y),) for y in np.asarray(reports)]

    def from_payloads(self, payloads: list[Payload]) -> Reports:
        return self._values(np.array([p[0] for p in payloads], dtype=np.int64))


class OUE(FrequencyOracle):
    """Optimized unary encoding; a report is ``d`` bits (payload: the indices of set bits)."""

    name = "oue"

    def accepts(self, payload: Sequence[int]) -> bool:
        """Indices of set bits, each in the domain."""
        return len(payload) <= self.d and all(0 <= k < self.d for k in payload)

    @property
    def p(self) -> float:
        return 0.5

    @property
    def q(self) -> float:
        return 1.0 / (math.exp(self.eps) + 1.0)

    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> Reports:
        v = self._values(values)
        bits = rng.random((v.shape[0], self.d)) < self.q
        bits[np.arange(v.shape[0]), v] = rng.random(v.shape[0]) < self.p
        return bits

    def sample_support(self, counts: npt.ArrayLike, rng: np.random.Generator) -> IntArray | None:
        c = np.asarray(counts, dtype=np.int64)
        return np.asarray(
            rng.binomial(c, self.p) + rng.binomial(c.sum() - c, self.q), dtype=np.int64
        )

    def support(self, reports: Reports) -> IntArray:
        r = np.asarray(reports, dtype=bool).reshape(-1, self.d)
        counts: IntArray = r.sum(axis=0, dtype=np.int64)
        return counts

    def payloads(self, reports: Reports) -> list[Payload]:
        return [tuple(int(k) for k in np.flatnonzero(row)) for row in np.asarray(reports)]

    def from_payloads(self, payloads: list[Payload]) -> Reports:
        bits = np.zeros((len(payloads), self.d), dtype=bool)
        rows = np.repeat(np.arange(len(payloads)), [len(p) for p in payloads])
        cols = self._values(np.array([k for p in payloads for k in p], dtype=np.int64))
        bits[rows, cols] = True
        return bits


class OLH(FrequencyOracle):
    """Optimized local hashing into ``g = round(e^eps) + 1`` cells; a report is ``(a, b, y)``."""

    name = "olh"

    def accepts(self, payload: Sequence[int]) -> bool:
        """``(a, b, y)``: a hash with ``1 <= a < PRIME``, ``0 <= b < PRIME``, a cell ``y < g``."""
        return (
            len(payload) == 3
            and 1 <= payload[0] < PRIME
            and 0 <= payload[1] < PRIME
            and 0 <= payload[2] < self.g
        )

    @property
    def g(self) -> int:
        """Number of hash cells."""
        return round(math.exp(self.eps)) + 1

    @property
    def p(self) -> float:
        return math.exp(self.eps) / (math.exp(self.eps) + self.g - 1)

    @property
    def q(self) -> float:
        return 1.0 / self.g

    def perturb(self, values: npt.ArrayLike, rng: np.random.Generator) -> Reports:
        v = self._values(values)
        n, g = v.shape[0], self.g
        a = rng.integers(1, PRIME, n)
        b = rng.integers(0, PRIME, n)
        h = (a * v + b) % PRIME % g
        keep = rng.random(n) < self.p
        other = np.asarray(rng.integers(0, g - 1, n), dtype=np.int64)
        other += other >= h
        return np.stack([a, b, np.where(keep, h, other)], axis=1).astype(np.int64)

    def support(self, reports: Reports) -> IntArray:
        r = np.asarray(reports, dtype=np.int64).reshape(-1, 3)
        out = np.zeros(self.d, dtype=np.int64)
        k = np.arange(self.d, dtype=np.int64)
        for start in range(0, r.shape[0], 1 << 16):  # chunks bound the (reports, d) matrix
            chunk = r[start : start + (1 << 16)]
            a, b, y = chunk[:, 0], chunk[:, 1], chunk[:, 2]
            hits = (a[:, None] * k[None, :] + b[:, None]) % PRIME % self.g == y[:, None]
            out += hits.sum(axis=0, dtype=np.int64)
        return out

    def payloads(self, reports: Reports) -> list[Payload]:
        return [(int(a), int(b), int(y)) for a, b, y in np.asarray(reports)]

    def from_payloads(self, payloads: list[Payload]) -> Reports:
        r = np.array(payloads, dtype=np.int64).reshape(-1, 3)
        if r.size and ((r[:, 0] < 1).any() or (r[:, :2] >= PRIME).any() or (r[:, 1] < 0).any()):
            raise ParameterError("OLH hash seeds must satisfy 1 <= a < P and 0 <= b < P")
        if r.size and ((r[:, 2] < 0).any() or (r[:, 2] >= self.g).any()):
            raise ParameterError(f"OLH reports must lie in [0, g={self.g})")
        return r


_CLASSES: dict[str, type[FrequencyOracle]] = {"grr": GRR, "oue": OUE, "olh": OLH}


def check_choice(oracle: str) -> str:
    """Validate an ``oracle`` parameter (a protocol name or ``"adaptive"``)."""
    return validate.choice("oracle", oracle, CHOICES)


def choose(d: int, eps: float) -> OracleName:
    """The adaptive choice: GRR if ``d < 3 e^eps + 2``, else OUE.

    >>> choose(2, 0.05), choose(100, 1.0)
    ('grr', 'oue')
    """
    return "grr" if d < 3.0 * math.exp(eps) + 2.0 else "oue"


def make(oracle: str, d: int, eps: float) -> FrequencyOracle:
    """The oracle named ``oracle`` (``"adaptive"`` resolves through :func:`choose`)."""
    name = choose(d, eps) if check_choice(oracle) == "adaptive" else oracle
    return _CLASSES[name](d, eps)
