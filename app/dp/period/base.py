"""What every period mechanism shares: a buffer of ``W`` slots, the ledger, delayed releases.

A *period* mechanism releases slot ``t`` only at a later slot: it buffers the true histograms of
one period of ``W`` consecutive slots (``W = max_g w_g``, periods aligned on slot 1) and
releases the whole period at its last slot (OptStream, Alg. 2 l.1-3). ``step`` therefore
returns a list: empty inside a period, the period's ``W`` releases in slot order at its end.

Budget and the ledger
---------------------
Each period's release is ``eps_P``-DP against any change confined to the period. A sliding
window of ``W`` slots may straddle two periods and then pays for both (spec seed-001 §1.6), so:

* ``strict=True`` (default) runs every period at ``eps_P = eps / 2`` (``eps`` when ``W = 1``,
  where windows and periods coincide) and records ``eps_P`` on the window ledger at the
  period's **first** slot and again at its **last** slot. Every window of ``W`` slots that
  touches a period contains its first or its last slot, so the ledger's window sums bound
  the true loss ``sum of eps_P over the periods a window touches``; the ledger refuses any
  window above ``eps``, which proves w-event ``eps``-DP for every sliding window.
* ``strict=False`` (the paper) runs every period at ``eps_P = eps`` and records it at the
  period's last slot. The ledger then proves ``eps`` per *aligned* period only; a straddling
  window loses up to ``2 eps``: **not w-event private** (kept to reproduce the papers; the
  service refuses it unless a stream accepts a weaker guarantee).

Both records happen before any noise of the period is drawn (the first one ``W - 1`` slots
earlier). Personalized groups run at the strictest requirement ``(max w, min eps)``, which
satisfies every group (PWSM paper §5.2): a window of ``w_g <= W`` slots touches at most two
periods as well.

Sensitivity
-----------
``Delta`` is the L1 bound of one user's change to one slot's histogram: ``sensitivity`` for
count streams (1 add/remove, 2 replace, ``l`` for up to ``l`` values), and ``alpha *
sensitivity`` for sum streams in the (w, alpha) model (spec §1.3), whose inputs are
non-negative reals clipped to ``alpha`` per user and slot by the service.

Noise
-----
``noise="geometric"`` (the default, :data:`app.dp.noise.SAFE_NOISE`) is DP as implemented;
``"laplace"`` is numpy's floating-point Laplace, for reproducing the papers only. Per noised
quantity, ``geometric`` means (:mod:`app.dp.noise`):

==============================================  ========  =========
quantity                                        counts    sums
==============================================  ========  =========
OptStream's perturbed samples (``k`` rows)      integers  grid
OptStream's feature answers (partition sums)    integers  grid
PeGaSus' Perturber (one slot's histogram)       integers  grid
DFT's retained real and imaginary parts         grid      grid
SVT threshold and scores (L1 sampler, Grouper)  grid      grid
==============================================  ========  =========

*integers*: the quantity is a sum of counts, exact in floating point, and its sensitivity
(``k Delta``, ``w Delta``, ``Delta``) is an integer: two-sided geometric noise with ``units =
sensitivity`` (:func:`~app.dp.noise.add_noise` with ``exact=True``). *grid*: the quantity is
real, so it is floored onto a power-of-two grid and gets two-sided geometric noise in grid
steps, the sensitivity rounded up to the grid plus two steps per value for the flooring and
the floating-point error of computing it (:func:`~app.dp.noise.grid_units`). Either way every
output is an integer times a public step, and the ratio of its probabilities under neighbours
is bounded by the integer sensitivity alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.budget import WindowLedger
from app.dp.errors import ParameterError
from app.dp.interfaces import PeriodStepped
from app.dp.noise import SAFE_NOISE, NoiseKind, check_kind
from app.dp.types import FloatArray, Group, IntArray, Release, WindowSpend


class PeriodMechanism(PeriodStepped):
    """Base of the period mechanisms; see the module docstring."""

    kind = "period"
    per_slot: ClassVar[bool] = False
    """True for mechanisms that release every slot at once (period of one slot, ``eps/W``)."""

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        noise: str = SAFE_NOISE,
        sensitivity: int = 1,
        alpha: float | None = None,
        strict: bool = True,
    ) -> None:
        self.d = validate.integer("d", d)
        self.groups = groups = validate.sequence("groups", groups, Group)
        self.noise: NoiseKind = check_kind(noise)
        self.sensitivity = validate.integer("sensitivity", sensitivity)
        self.alpha = None if alpha is None else validate.positive("alpha", alpha)
        self.strict = validate.flag("strict", strict)
        self.budget_group = Group(max(g.w for g in groups), min(g.eps for g in groups))
        self._reset()

    # -- parameters -------------------------------------------------------------------------

    @property
    def period(self) -> int:
        """``W``: slots per period (1 for per-slot mechanisms)."""
        return 1 if self.per_slot else self.budget_group.w

    @property
    def exact(self) -> bool:
        """Whether the slot values are counts, so sums of them with an integer sensitivity take
        exact integer noise (see Noise in the module docstring); sums take the grid."""
        return self.alpha is None

    def weaker_guarantee(self) -> str | None:
        if not self.strict and self.period > 1:
            return "strict=False: a sliding window straddling two periods loses up to 2 eps"
        return None

    @property
    def delta(self) -> float:
        """``Delta``: one user's L1 change to one slot's histogram (see the module docstring)."""
        return float(1.0 if self.alpha is None else self.alpha) * self.sensitivity

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {"d": 3, "groups": [Group(6, 1.0), Group(4, 0.5)]}

    # -- budget -------------------------------------------------------------------------------

    def charges(self) -> list[int]:
        """Ledger units recorded at each position of a period (see the module docstring)."""
        b = self.ledger.budgets[0]
        if self.per_slot:
            return [b.total // self.budget_group.w]
        n = self.period
        out = [0] * n
        if self.strict and n > 1:
            out[0] = out[-1] = b.half  # eps_P = eps / 2 at the first and the last slot
        else:
            out[-1] = b.total  # eps_P = eps, recorded once
        return out

    @property
    def period_eps(self) -> float:
        """``eps_P``: the budget one period's release spends."""
        b = self.ledger.budgets[0]
        return b.to_eps(max(self.charges()))

    def window_report(self) -> list[WindowSpend]:
        """Per declared group, the ledger's spending in the window of ``W`` slots ending at the
        last slot (the strictest requirement accounts for every group)."""
        spent = self.ledger.spent(0)
        return [WindowSpend(self.budget_group.w, self.budget_group.eps, spent)] * len(self.groups)

    # -- state ------------------------------------------------------------------------------

    def _reset(self) -> None:
        self.t = 0
        self.buffer: list[list[float]] = []
        self.ledger = WindowLedger([self.budget_group], publication_share=1)  # type: ignore[arg-type]
        self._reset_extra()

    def _reset_extra(self) -> None:
        """Subclasses with state beyond the period buffer set it up here."""

    def _state(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "buffer": [list(row) for row in self.buffer],
            "ledger": self.ledger.state_dict(),
        }

    def _load(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.buffer = [[float(v) for v in row] for row in state["buffer"]]
        self.ledger.load_state(state["ledger"])

    # -- the slot -----------------------------------------------------------------------------

    def step(
        self,
        counts: npt.ArrayLike,
        rng: np.random.Generator,
        population: Sequence[int] | IntArray | None = None,
    ) -> list[Release]:
        """Take one slot; return the releases that became known at it (slot order).

        Parameters
        ----------
        counts
            ``(m, d)``: per requirement group, the slot's counts (non-negative integers) or, for
            a sum stream (``alpha`` set), clipped sums (non-negative reals). Not modified.
        rng
            The only source of randomness.
        population
            Accepted for the common interface and ignored.
        """
        x = self._check_counts(counts).sum(axis=0)
        pos = self.t % self.period
        charges = self.charges()
        self.ledger.record([0], [charges[pos]])  # the ledger first, noise afterwards
        self.t += 1
        self.buffer.append([float(v) for v in x])
        if pos < self.period - 1:
            return []
        data = np.array(self.buffer, dtype=np.float64)
        out = self._release(data, self.period_eps, rng)
        first = self.t - self.period + 1
        self.buffer = []
        b = self.ledger.budgets[0]
        return [
            Release(
                slot=first + i,
                histogram=out[i],
                fresh=True,
                status="publish",
                spent_dc=np.zeros(len(self.groups)),
                spent_pub=np.full(len(self.groups), b.to_eps(charges[i])),
                mechanism=self.name,
                version=self.version,
                spent_exact=(b.to_fraction(charges[i]),) * len(self.groups),
            )
            for i in range(self.period)
        ]

    def _release(self, x: FloatArray, eps: float, rng: np.random.Generator) -> FloatArray:
        """Release one period: ``x`` is ``(W, d)`` true values, ``eps`` the period's budget."""
        raise NotImplementedError

    def _check_counts(self, counts: npt.ArrayLike) -> FloatArray:
        c = np.asarray(counts)
        if c.shape != (len(self.groups), self.d):
            raise ParameterError(
                f"counts must have shape (groups={len(self.groups)}, d={self.d}), got {c.shape}"
            )
        if self.alpha is None:
            if c.size and not np.issubdtype(c.dtype, np.integer):
                raise ParameterError("counts must be non-negative integers (alpha is None)")
        elif c.size and not (np.issubdtype(c.dtype, np.number) and np.isfinite(c).all()):
            raise ParameterError("sums must be finite numbers")
        if c.size and (c < 0).any():
            raise ParameterError("counts must be non-negative")
        return c.astype(np.float64)
