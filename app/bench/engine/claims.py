"""What every claim module shares: the typed verdict, the :class:`Claim` row, and small pure
helpers over the means of a sweep (lowest mechanism per point, monotone curves, reductions).

A sweep's means are ``(eps, w, mechanism) -> (mean, sample std, seeds)`` as
:func:`app.bench.engine.presets.summarize` returns them.

>>> means = {(0.2, 120, "bd"): (10.0, 0.0, 1), (0.2, 120, "pbd"): (4.0, 0.0, 1),
...          (1.0, 120, "bd"): (5.0, 0.0, 1), (1.0, 120, "pbd"): (1.0, 0.0, 1)}
>>> reduction(means, "bd", "pbd")[0], best(means, ("bd", "pbd"))
(0.7, ['pbd', 'pbd'])
>>> Verdict.AGREE == "agree", str(Verdict.NOT_RUN)
(True, 'not run')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from app.bench.engine.evidence import Means, RatioMeans, Runs

__all__ = [
    "MAGNITUDE_TOLERANCE",
    "Claim",
    "Means",
    "RatioMeans",
    "Runs",
    "Verdict",
    "best",
    "by_any",
    "by_majority",
    "by_share",
    "curves",
    "mean",
    "monotone",
    "ordered",
    "pct",
    "percent_verdict",
    "points",
    "reduction",
]


class Verdict(StrEnum):
    """How dpstream's measurement compares with the paper's claim."""

    AGREE = "agree"
    PARTLY = "partly"
    DISAGREE = "disagree"
    NOT_RUN = "not run"


@dataclass(frozen=True)
class Claim:
    """One headline claim: where the paper states it, its number, dpstream's, the verdict."""

    paper: str
    ref: str
    claim: str
    paper_value: str
    measured: str
    verdict: Verdict
    why: str = ""


MAGNITUDE_TOLERANCE = 15.0
"""Percentage points within which a measured reduction counts as the paper's number."""


def mean(means: Means, eps: float, w: int, mech: str) -> float:
    """The mean of ``mech`` at ``(eps, w)``."""
    return means[(eps, w, mech)][0]


def points(means: Means) -> list[tuple[float, int]]:
    """The sweep's ``(eps, w)`` points, sorted."""
    return sorted({(e, w) for e, w, _ in means})


def pct(x: float) -> str:
    """``0.123`` -> ``'12.3%'``."""
    return f"{100 * x:.1f}%"


def reduction(means: Means, base: str, new: str) -> tuple[float, float, int, int]:
    """Mean over points of ``1 - new/base`` and of the ln version; points where new < base."""
    pts = points(means)
    amre = [1 - mean(means, e, w, new) / mean(means, e, w, base) for e, w in pts]
    ln = [
        (math.log(mean(means, e, w, base)) - math.log(mean(means, e, w, new)))
        / math.log(mean(means, e, w, base))
        for e, w in pts
    ]
    wins = sum(mean(means, e, w, new) < mean(means, e, w, base) for e, w in pts)
    return sum(amre) / len(amre), sum(ln) / len(ln), wins, len(pts)


def percent_verdict(wins: int, total: int, measured: float, paper: float) -> Verdict:
    """Direction at every point and the paper's percentage within the tolerance: agree."""
    if wins < total:
        return Verdict.DISAGREE if wins <= total // 2 else Verdict.PARTLY
    close = abs(100 * measured - paper) <= MAGNITUDE_TOLERANCE
    return Verdict.AGREE if close else Verdict.PARTLY


def by_share(good: int, total: int) -> Verdict:
    """All: agree; at least three quarters: partly; fewer: disagree."""
    if good == total:
        return Verdict.AGREE
    return Verdict.PARTLY if good >= total * 3 // 4 else Verdict.DISAGREE


def by_any(good: int, total: int) -> Verdict:
    """All: agree; some: partly; none: disagree."""
    if good == total:
        return Verdict.AGREE
    return Verdict.PARTLY if good else Verdict.DISAGREE


def by_majority(good: int, total: int) -> Verdict:
    """All: agree; more than half: partly; else disagree."""
    if good == total:
        return Verdict.AGREE
    return Verdict.PARTLY if good > total // 2 else Verdict.DISAGREE


def monotone(values: list[float], increasing: bool) -> bool:
    """Whether ``values`` never fall (``increasing``) or never rise."""
    pairs = list(zip(values, values[1:], strict=False))
    return all((b >= a) if increasing else (b <= a) for a, b in pairs)


def curves(means: Means, mechs: Sequence[str], x: str) -> dict[str, list[float]]:
    """Each mechanism's means along the ``x`` axis (``"eps"`` or ``"w"``)."""
    pts = points(means)
    pts.sort(key=(lambda p: p[0]) if x == "eps" else (lambda p: p[1]))
    return {m: [mean(means, e, w, m) for e, w in pts] for m in mechs}


def ordered(values: dict[str, float], names: Sequence[str]) -> bool:
    """Whether ``values`` rise strictly in the order of ``names``."""
    return all(values[a] < values[b] for a, b in zip(names, names[1:], strict=False))


def best(means: Means, mechs: Sequence[str]) -> list[str]:
    """The mechanism with the lowest mean at each point."""
    return [min(mechs, key=lambda m: mean(means, e, w, m)) for e, w in points(means)]
