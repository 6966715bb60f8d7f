"""What an open-domain mechanism publishes for one slot: a key -> noisy count map, with its cost."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from app.dp.types import FloatArray, IntArray, Status, WindowSpend

BoolArray = npt.NDArray[np.bool_]


def _frozen(a: npt.ArrayLike, dtype: type) -> npt.NDArray[np.generic]:
    out: npt.NDArray[np.generic] = np.array(a, dtype=dtype)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class OpenRelease:
    """One slot of an open-domain stream.

    Attributes
    ----------
    slot
        The mechanism's slot counter, 1-based.
    keys
        Released keys, sorted (never by count: the order says nothing about the data).
    counts
        Their noisy counts (integers, read-only), aligned with ``keys``.
    new
        Whether each key was selected at this slot (read-only); the others were public.
    fresh, status
        Whether the public keys' counts were noised anew (``"publish"``) or the last ones
        repeated (``"skip"``, ``"nullified"``). New keys are always fresh.
    threshold
        The selection threshold ``tau`` of the slot (public: it follows from the parameters).
    retired
        Public keys retired after this slot (their released counts stayed below ``tau`` for
        ``retire_after`` slots, or the cap of ``max_released_keys`` left them out of this
        release); they are not public at the next slot.
    eps_spent, delta_spent
        Per level, the eps and the delta the slot recorded on the ledger (exact).
    mechanism, version
        Who made it.
    """

    slot: int
    keys: tuple[str, ...]
    counts: IntArray
    new: BoolArray
    fresh: bool
    status: Status
    threshold: int
    retired: tuple[str, ...]
    eps_spent: tuple[Fraction, ...]
    delta_spent: tuple[Fraction, ...]
    mechanism: str
    version: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", _frozen(self.counts, np.int64))
        object.__setattr__(self, "new", _frozen(self.new, np.bool_))

    def histogram(self) -> dict[str, int]:
        """The release as a key -> count map."""
        return dict(zip(self.keys, (int(c) for c in self.counts), strict=True))

    @property
    def spent(self) -> FloatArray:
        """``eps_spent`` as floats, per level (what the service's metrics add up)."""
        return np.array([float(x) for x in self.eps_spent], dtype=np.float64)


@dataclass(frozen=True)
class OpenWindowSpend(WindowSpend):
    """A level's window spending with its delta: ``spent`` eps of ``eps`` and
    ``delta_spent`` of ``delta`` in the ``w`` slots ending at the last slot (both exact)."""

    delta: float = 0.0
    delta_spent: Fraction = Fraction(0)

    @property
    def delta_fraction(self) -> float:
        """``delta_spent / delta``: 1.0 when the window's delta is exhausted."""
        return float(self.delta_spent / Fraction(repr(self.delta)))
