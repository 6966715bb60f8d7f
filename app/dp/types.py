"""Value types shared by every mechanism: requirement groups and releases."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from app.dp import validate

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Status = Literal["publish", "skip", "nullified"]


@dataclass(frozen=True)
class Group:
    """A privacy requirement level: ``eps``-DP for any ``w`` consecutive slots.

    All users sharing one ``(w, eps)`` pair form a requirement group; central ledgers are kept per
    group (PWSM paper §4.3, spec seed-000 §2.12).

    >>> Group(120, 0.6)
    Group(w=120, eps=0.6)
    >>> Group(0, 0.6)
    Traceback (most recent call last):
    ...
    app.dp.errors.ParameterError: Group.w must be an integer >= 1, got 0
    """

    w: int
    eps: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "w", validate.integer("Group.w", self.w))
        object.__setattr__(self, "eps", validate.positive("Group.eps", self.eps))


@dataclass(frozen=True)
class WindowSpend:
    """Budget a requirement group spent in the window of ``w`` slots ending at the last slot.

    ``w`` and ``eps`` are those of the ledger that accounts for the group (the group's own for
    personalized mechanisms, the strictest ``(max w, min eps)`` for the others); ``spent`` is
    exact (a :class:`~fractions.Fraction` of eps units).
    """

    w: int
    eps: float
    spent: Fraction

    @property
    def fraction(self) -> float:
        """``spent / eps``: 1.0 when the window is exhausted."""
        return float(self.spent / Fraction(repr(self.eps)))


def _frozen(a: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    out: npt.NDArray[np.generic] = np.array(a, dtype=dtype)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class Release:
    """What a mechanism publishes for one slot, with the budget it cost.

    Attributes
    ----------
    slot
        The mechanism's slot counter, 1-based.
    histogram
        The released histogram, length ``d`` (read-only).
    fresh
        True if newly noised; False if the last release was repeated (skip or nullified).
    status
        ``"publish"``, ``"skip"`` or ``"nullified"`` (PBA/BA only).
    spent_dc, spent_pub
        Budget each requirement group spent on the dissimilarity and on the publication. For a
        local mechanism: the budget each user asked in that round spent on its report.
    mechanism, version
        Registry name and implementation version of the mechanism that produced it.
    spent_exact
        ``spent`` as exact fractions of eps, where the mechanism's ledger keeps them.
    users_dc, users_pub
        Local mechanisms only (None otherwise): how many users were asked to report in the
        dissimilarity and in the publication round of this slot (0 when the round did not run).
    """

    slot: int
    histogram: FloatArray
    fresh: bool
    status: Status
    spent_dc: FloatArray
    spent_pub: FloatArray
    mechanism: str
    version: int
    spent: FloatArray = field(init=False)
    users_dc: int | None = None
    users_pub: int | None = None
    spent_exact: tuple[Fraction, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "histogram", _frozen(self.histogram, np.float64))
        object.__setattr__(self, "spent_dc", _frozen(self.spent_dc, np.float64))
        object.__setattr__(self, "spent_pub", _frozen(self.spent_pub, np.float64))
        object.__setattr__(self, "spent", _frozen(self.spent_dc + self.spent_pub, np.float64))
