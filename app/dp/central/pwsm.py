"""PWSM (Alg. 2): the per-slot scheme that PBD, PBA, BD and BA instantiate.

Paper: Du et al., PVLDB 18(6) 2025, Alg. 2 (spec ``seed-000-pwsm.md`` §2.3). Each slot splits a
user's budget into a dissimilarity half, ``eps_i / (2 w_i)`` at every slot, and a publication
half that the subclass schedules (:meth:`PWSMMechanism._offer`):

1. ensure the dissimilarity budget and the offered publication budget on the ledger;
2. ``dis = DC(D_t, e1, r_{t-1})`` (Alg. 3, computed even in nullified slots, spec A12);
3. ``(theta2, err2) = OBS(offered)``;
4. publish ``SM(D_t, offered, theta2)`` iff ``dis > threshold`` (strict, spec §2.0), where the
   threshold is ``sqrt(err2)`` for the personalized mechanisms and ``1 / b`` for Kellaris's
   BD and BA (spec A19); otherwise repeat the last release and spend nothing on publication.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar

import numpy as np

from app.dp.central.base import CentralMechanism, Outcome
from app.dp.personalized import dissimilarity, obs, sampling_mechanism
from app.dp.types import FloatArray, IntArray


class PWSMMechanism(CentralMechanism):
    """The shared slot logic of PBD, PBA, BD and BA; see the module docstring."""

    uses_obs = True
    kellaris_threshold: ClassVar[bool] = False
    """Publish iff ``dis > 1/b`` (Kellaris's BD and BA, ``b`` the offered Laplace budget
    ``theta``) instead of ``dis > sqrt(err)`` (spec A19)."""

    def _offer(self, t: int) -> tuple[list[int], bool]:
        """Publication units offered to each budget group at slot ``t``, and nullified-or-not."""
        raise NotImplementedError

    def next_offer(self) -> FloatArray:
        """The publication budget each group would be offered at the next slot (0 if nullified)."""
        offer, _ = self._offer(self.t + 1)
        return self._per_group(offer)

    def _published(self, t: int, offer: list[int]) -> None:
        """Bookkeeping after a publication at ``t`` (PBA/BA remember ``l`` and the shares)."""

    def _threshold(self, theta: Fraction, err: float) -> float:
        """Alg. 2 l.5 / Alg. 4 l.7 / Alg. 5 l.14: publish iff ``dis > sqrt(err_min)``; or
        Kellaris's ``1 / b``, the offered Laplace scale (:attr:`kellaris_threshold`)."""
        return 1.0 / float(theta) if self.kellaris_threshold else math.sqrt(err)

    def _publishes(self, dis: float, threshold: float) -> bool:
        """The publication decision (strict ``>``, spec §2.0)."""
        return dis > threshold

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        dc = [b.share for b in self.ledger.budgets]  # e1_g = eps_g / (2 w_g)
        offer, nullified = self._offer(t)
        self.ledger.ensure(dc, offer)  # 1. check before any draw
        dis = dissimilarity(  # 2. DC, Alg. 3
            counts, self._calibrated(dc), population, self.last_release, self.noise, rng
        )
        nothing = [0] * len(offer)
        if nullified:
            return Outcome(None, "nullified", dc, nothing)
        if not any(offer):
            return Outcome(None, "skip", dc, nothing)
        budgets = self._calibrated(offer)
        theta, err = obs(budgets, population)  # 3. OBS on the offered budgets
        if not self._publishes(dis, self._threshold(theta, err)):  # 4. decide
            return Outcome(None, "skip", dc, nothing)
        histogram = sampling_mechanism(counts, budgets, theta, self.noise, rng)
        self._published(t, offer)
        return Outcome(histogram, "publish", dc, offer)
