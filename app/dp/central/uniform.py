"""Uniform: the same budget eps/w at every slot (Kellaris et al., VLDB 2014)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from app.dp.central.base import CentralMechanism, Outcome
from app.dp.noise import perturb
from app.dp.types import IntArray


class Uniform(CentralMechanism):
    """Uniform: a fresh release at every slot with budget ``eps / w``.

    Paper
    -----
    G. Kellaris et al., PVLDB 7(12), 2014, §4.1 (Uniform); used in the PWSM paper's Example 1.
    Spec ``seed-000-pwsm.md`` §2.9.

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w, eps)            ``budget_groups[0] = (max_g w_g, min_g eps_g)``
    eps / w             two shares, ``2 * ledger.budgets[0].share`` units
    ==================  ==================================================

    Parameters
    ----------
    d, groups, noise
        Domain size, requirement groups (only ``(max w, min eps)`` is used), noise kind.

    State
    -----
    t, last_release, ledger
        Slot counter, last release, and the window ledger (one row).

    Privacy
    -------
    Neighbours: add-remove at ``sensitivity=1`` (the paper's relation); ``sensitivity=2`` (the
    service's default, ``neighbours: replace``) draws every noise at ``eps / 2``, so a change of
    one user's value is protected at the same eps.
    w-event eps-DP: ``w`` slots of ``eps/w`` each (sequential composition); per-cell error
    ``2 (w / eps)**2`` with Laplace noise.

    Deviations
    ----------
    None.

    Examples
    --------
    Every slot is fresh and costs ``eps / w``:

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = Uniform(d=3, groups=[Group(8, 1.0)])
    >>> r = m.step([[10, 20, 30]], np.random.default_rng(0))
    >>> r.fresh, float(r.spent[0])
    (True, 0.125)

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014.
    """

    name = "uniform"
    version = 1
    personalized = False
    publication_share = Fraction(1)

    def describe(self) -> str:
        return "Uniform at (max w, min eps): eps/w on a fresh release at every slot"

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        pub = [2 * b.share for b in self.ledger.budgets]  # eps / w
        self.ledger.ensure([0], pub)
        eps = float(self._calibrated(pub)[0])
        histogram = perturb(self.noise, rng, counts[0].astype(np.float64), eps)
        return Outcome(histogram, "publish", [0], pub)
