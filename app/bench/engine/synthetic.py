"""The synthetic binary streams of the papers: TLNS (LNS), Sin and Log.

At slot ``t = 1..T`` each of ``N`` users independently holds value 1 with probability ``p_t``,
else 0, so the histogram has ``d = 2`` cells ``(#0, #1)``. The laws of ``p_t`` are the same in
the PWSM paper (§5.1; spec ``seed-000`` §6.1, A23-A24: ``N = T = 10,000``) and in LDP-IDS
(§7.1; spec ``seed-004`` §7: ``N = 200,000``, ``T = 800``):

* **TLNS** (LNS): ``p_t = p_{t-1} + N(0, Q)``, ``sqrt(Q) = 0.0025``, ``p_0 = 0.05``, clipped
  to ``[0, 1]``;
* **Sin**: ``p_t = A sin(b t) + h`` with ``A = 0.05``, ``b = 0.01``, ``h = 0.075``;
* **Log**: ``p_t = A / (1 + exp(-b t))`` with ``A = 0.25``, ``b = 0.01``.

The paper's formulas are used without the authors' 2-decimal rounding (spec A23).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

Probabilities = npt.NDArray[np.float64]


def tlns(T: int, rng: np.random.Generator, p0: float = 0.05, std: float = 0.0025) -> Probabilities:
    """Time-varying linear noisy stream: a clipped Gaussian random walk of ``p``."""
    p = np.empty(T)
    prev = p0
    steps = rng.normal(0.0, std, T)
    for t in range(T):  # the clip makes the walk path-dependent
        prev = min(1.0, max(0.0, prev + steps[t]))
        p[t] = prev
    return p


def sin(
    T: int, rng: np.random.Generator, a: float = 0.05, b: float = 0.01, h: float = 0.075
) -> Probabilities:
    """``p_t = a sin(b t) + h``; ``rng`` is unused (the law is deterministic)."""
    t = np.arange(1, T + 1, dtype=np.float64)
    return np.asarray(a * np.sin(b * t) + h, dtype=np.float64)


def log(T: int, rng: np.random.Generator, a: float = 0.25, b: float = 0.01) -> Probabilities:
    """``p_t = a / (1 + exp(-b t))``; ``rng`` is unused.

    >>> round(float(log(1, np.random.default_rng(0))[0]), 4)
    0.1256
    """
    t = np.arange(1, T + 1, dtype=np.float64)
    return np.asarray(a / (1.0 + np.exp(-b * t)), dtype=np.float64)


GENERATORS: dict[str, Callable[..., Probabilities]] = {"tlns": tlns, "sin": sin, "log": log}
"""Name -> ``p_t`` law. ``lns`` is the LDP-IDS paper's name for TLNS."""
GENERATORS["lns"] = tlns

PAPER_SIZES: dict[str, tuple[int, int]] = {
    "pwsm": (10_000, 10_000),
    "ldp-ids": (200_000, 800),
    "pldp-ids": (10_000, 10_000),
}
"""Paper -> ``(N users, T slots)`` of its synthetic experiments."""


def probabilities(name: str, T: int, rng: np.random.Generator) -> Probabilities:
    """``p_t`` for ``t = 1..T`` of the named stream."""
    try:
        law = GENERATORS[name]
    except KeyError:
        raise ValueError(f"stream must be one of {sorted(GENERATORS)}, got {name!r}") from None
    return law(T, rng)


def values(name: str, T: int, N: int, rng: np.random.Generator) -> npt.NDArray[np.int8]:
    """Per-user values ``(T, N)`` in {0, 1}: user ``i`` holds 1 at slot ``t`` w.p. ``p_t``."""
    p = probabilities(name, T, rng)
    out = np.empty((T, N), dtype=np.int8)
    for start in range(0, T, 256):  # blocks keep the float draws small
        stop = min(T, start + 256)
        out[start:stop] = rng.random((stop - start, N)) < p[start:stop, None]
    return out


def group_counts(
    name: str, T: int, sizes: list[int], rng: np.random.Generator
) -> npt.NDArray[np.int64]:
    """Counts ``(T, m, 2)`` for groups of ``sizes`` users, without materialising users.

    The number of 1s in a group of ``n`` i.i.d. Bernoulli(``p_t``) users is Binomial(``n``,
    ``p_t``), so this has the law of :func:`values` aggregated per group.

    >>> c = group_counts("sin", 3, [10, 5], np.random.default_rng(0))
    >>> c.shape, c.sum(axis=2).tolist()[0]
    ((3, 2, 2), [10, 5])
    """
    p = probabilities(name, T, rng)
    n = np.asarray(sizes, dtype=np.int64)
    ones = rng.binomial(n[None, :], p[:, None])
    return np.stack([n[None, :] - ones, ones], axis=2).astype(np.int64)
