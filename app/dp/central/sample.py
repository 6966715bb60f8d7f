"""Sample: the whole budget on one slot in every w (Kellaris et al., VLDB 2014)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from app.dp.central.base import CentralMechanism, Outcome
from app.dp.noise import perturb
from app.dp.types import IntArray


class Sample(CentralMechanism):
    """Sample: publish with the full ``eps`` at slots 1, w+1, 2w+1, ...; repeat in between.

    Paper
    -----
    G. Kellaris et al., PVLDB 7(12), 2014, §4.1 (Sample); named in the PWSM paper §4.3.
    Spec ``seed-000-pwsm.md`` §2.10.

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w, eps)            ``budget_groups[0] = (max_g w_g, min_g eps_g)``
    sampling slots      ``(t - 1) % w == 0``
    ==================  ==================================================

    Parameters
    ----------
    d, groups, noise
        Domain size, requirement groups (only ``(max w, min eps)`` is used), noise kind.

    State
    -----
    t, last_release, ledger
        Slot counter, last release, window ledger (one row).

    Privacy
    -------
    Neighbours: add-remove at ``sensitivity=1`` (the paper's relation); ``sensitivity=2`` (the
    service's default, ``neighbours: replace``) draws every noise at ``eps / 2``, so a change of
    one user's value is protected at the same eps.
    w-event eps-DP: any window of ``w`` consecutive slots holds exactly one sampling slot.

    Deviations
    ----------
    The first sample is at t = 1 (spec §2.10, a resolution).

    Examples
    --------
    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = Sample(d=2, groups=[Group(3, 1.0)])
    >>> rng = np.random.default_rng(0)
    >>> [(r.fresh, float(r.spent[0])) for r in (m.step([[4, 2]], rng) for _ in range(4))]
    [(True, 1.0), (False, 0.0), (False, 0.0), (True, 1.0)]

    References
    ----------
    Kellaris et al., PVLDB 7(12), 2014.
    """

    name = "sample"
    version = 1
    personalized = False
    publication_share = Fraction(1)

    def describe(self) -> str:
        return "Sample at (max w, min eps): all of eps on one fresh release every w slots"

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        budget = self.ledger.budgets[0]
        if (t - 1) % budget.group.w:
            return Outcome(None, "skip", [0], [0])
        self.ledger.ensure([0], [budget.total])
        eps = float(self._calibrated([budget.total])[0])
        histogram = perturb(self.noise, rng, counts[0].astype(np.float64), eps)
        return Outcome(histogram, "publish", [0], [budget.total])
