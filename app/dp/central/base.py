"""What every central w-event mechanism shares: validation, the window ledger, ``step``.

A central mechanism sees, per slot, the true counts per requirement group: an ``(m, d)`` integer
matrix whose row ``g`` counts the users of group ``g`` holding each value. A subclass implements
:meth:`CentralMechanism._slot`, which must (1) compute what it may spend, (2) ``ensure`` it on
the ledger, and only then (3) draw noise. The base records the spending, keeps the last release
and builds the :class:`~app.dp.types.Release`; state only changes after a slot succeeded.

Personalized mechanisms (PBD, PBA) keep one ledger row per declared group. Static mechanisms
(Uniform, Sample, BD, BA) run at the conservative single requirement ``(max_g w_g, min_g
eps_g)``, which satisfies every group (PWSM paper §5.2), on the column sums of the counts; their
spending is reported for every declared group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.budget import WindowLedger
from app.dp.errors import ParameterError
from app.dp.interfaces import SlotStepped
from app.dp.noise import check_kind
from app.dp.types import FloatArray, Group, IntArray, Release, Status, WindowSpend


@dataclass(frozen=True)
class Outcome:
    """What one slot of a mechanism decided, in ledger units per budget group."""

    histogram: FloatArray | None  # None: repeat the last release
    status: Status
    dc: list[int]
    pub: list[int]


class CentralMechanism(SlotStepped):
    """Base of the central mechanisms; see the module docstring."""

    kind = "central"
    personalized: ClassVar[bool] = True
    publication_share: ClassVar[Fraction] = Fraction(1, 2)
    uses_obs: ClassVar[bool] = False
    """Whether ``step`` runs OBS, which needs the public ``population`` per group."""

    def __init__(
        self, d: int, groups: Sequence[Group], noise: str = "laplace", sensitivity: int = 1
    ) -> None:
        self.d = validate.integer("d", d)
        self.sensitivity = validate.integer("sensitivity", sensitivity)
        self.groups = groups = validate.sequence("groups", groups, Group)
        self.noise = check_kind(noise)
        if self.personalized:
            self.budget_groups = groups
        else:
            strictest = Group(max(g.w for g in groups), min(g.eps for g in groups))
            self.budget_groups = (strictest,)
        self._reset()

    def _reset(self) -> None:
        self.t = 0
        self.last_release: FloatArray = np.zeros(self.d)
        self.ledger = WindowLedger(self.budget_groups, self.publication_share)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {"d": 4, "groups": [Group(5, 1.0), Group(3, 0.5), Group(8, 2.0)]}

    def step(
        self,
        counts: npt.ArrayLike,
        rng: np.random.Generator,
        population: Sequence[int] | IntArray | None = None,
    ) -> Release:
        """Release one slot.

        Parameters
        ----------
        counts
            ``(m, d)`` non-negative integers: users of group ``g`` holding value ``j`` this slot.
            Not modified.
        rng
            The only source of randomness.
        population
            Public number of users per group. Required when the mechanism runs OBS
            (:attr:`uses_obs`): OBS chooses the sampling threshold, hence the noise scale, from
            it, so it must be a figure fixed before the data (a configured or published user
            count, spec §1.2, §2.12), never the slot's row sums. Those would make the noise
            scale a function of the data: a user joining a group could move the threshold, and
            the privacy loss is then unbounded by the offered budgets (issue 16). Mechanisms
            without OBS ignore it.
        """
        c = validate.counts(counts, len(self.groups), self.d)
        if population is None:
            if self.uses_obs:
                raise ParameterError(
                    f"population is required by {self.name}: OBS sets the noise scale from it; "
                    "pass the public number of users per group, never the slot's counts"
                )
            population = [0] * len(self.groups)  # unused: no OBS in this mechanism
        pop = np.asarray(population, dtype=np.int64)
        if pop.shape != (len(self.groups),) or (pop < 0).any():
            raise ParameterError(
                f"population must be {len(self.groups)} non-negative ints, got {population!r}"
            )
        if not self.personalized:
            c, pop = c.sum(axis=0, keepdims=True), pop.sum(keepdims=True)
        out = self._slot(self.t + 1, c, [int(n) for n in pop], rng)
        self.ledger.record(out.dc, out.pub)
        self.t += 1
        fresh = out.histogram is not None
        if out.histogram is not None:
            self.last_release = np.asarray(out.histogram, dtype=np.float64)
        return Release(
            slot=self.t,
            histogram=self.last_release,
            fresh=fresh,
            status=out.status,
            spent_dc=self._per_group(out.dc),
            spent_pub=self._per_group(out.pub),
            mechanism=self.name,
            version=self.version,
            spent_exact=self._exact_per_group(out.dc, out.pub),
        )

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        """Decide slot ``t``: ensure the budget on ``self.ledger``, then draw; never mutate."""
        raise NotImplementedError

    def ledger_per_group(self) -> bool:
        return self.personalized

    def window_report(self) -> list[WindowSpend]:
        out = []
        for g in range(len(self.groups)):
            b = g if self.personalized else 0
            group = self.ledger.budgets[b].group
            out.append(WindowSpend(group.w, group.eps, self.ledger.spent(b)))
        return out

    def _per_group(self, units: list[int]) -> FloatArray:
        spent = [b.to_eps(u) for b, u in zip(self.ledger.budgets, units, strict=True)]
        if not self.personalized:
            spent = spent * len(self.groups)
        return np.array(spent, dtype=np.float64)

    def _exact_per_group(self, dc: list[int], pub: list[int]) -> tuple[Fraction, ...]:
        spent = self._fractions([a + b for a, b in zip(dc, pub, strict=True)])
        return tuple(spent * len(self.groups) if not self.personalized else spent)

    def _fractions(self, units: list[int]) -> list[Fraction]:
        """Budgets in eps as recorded on the ledger (what the users are promised)."""
        return [b.to_fraction(u) for b, u in zip(self.ledger.budgets, units, strict=True)]

    def _calibrated(self, units: list[int]) -> list[Fraction]:
        """The budgets noise is drawn at: the ledger's budgets divided by the sensitivity.

        A user changes one slot's histogram by at most ``sensitivity`` in L1 (1: adding or
        removing its one value; 2: replacing it). Every noise draw at ``eps / sensitivity``
        with unit-sensitivity calibration is ``eps``-DP for such a change (group privacy,
        exact for Laplace and geometric noise on the histogram, and for the dissimilarity's
        ``1/d`` sensitivity), so the ledger keeps recording the claimed budget.
        """
        return [f / self.sensitivity for f in self._fractions(units)]

    def _state(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "last_release": [float(x) for x in self.last_release],
            "ledger": self.ledger.state_dict(),
        }

    def _load(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.last_release = np.array(state["last_release"], dtype=np.float64)
        self.ledger.load_state(state["ledger"])
