"""LBD: LDP Budget Distribution (LDP-IDS Algorithm 1)."""

from __future__ import annotations

import numpy as np

from app.dp.local.base import Ask, LocalMechanism
from app.dp.types import Status


class LBD(LocalMechanism):
    """LDP Budget Distribution: each publication spends half of the window's unspent half.

    Paper
    -----
    X. Ren et al., SIGMOD 2022, Algorithm 1, lines 1-14 (spec
    ``docs/specs/seed-004-ldp-ids.md`` §3.4).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    eps_{t,1}           ``share`` units: ``eps / (2w)`` (l.3, spec A1)
    eps_rm              ``half - ledger.pub_window(0)`` units (l.7)
    eps_{t,2}           ``eps_rm // 2`` units (l.8)
    dis, err            Eq. 4 (``on_tally``), ``V(eps_{t,2}, N)`` (l.9)
    ==================  ==================================================

    Protocol: dissimilarity round, everybody at ``eps/(2w)``; if ``dis > err``, publication
    round, everybody at ``eps_{t,2}``; the release is the publication round's estimate.

    Parameters
    ----------
    d, eps, w, users, buckets, oracle
        As in :class:`~app.dp.local.lbu.LBU`.

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`; the ledger holds the committed ``eps_{i,2}``.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (LDP-IDS App. A.3 (1), Thm 5.1): the dissimilarity rounds spend
    ``eps/(2w)`` per slot, ``eps/2`` per window; a publication spends half of what the window's
    publication half has left, so by induction the window never exceeds ``eps/2`` on
    publication (spec §4, LBD). Both halves are ``ensure`` d in exact units before a request.

    Deviations
    ----------
    * ``eps/(2w)`` per dissimilarity (spec A1); exact averaged variance for ``dis`` and ``err``
      (spec A2); publish iff ``dis > err`` (spec A3).
    * The halving is exact in units for 40 halvings, then rounds down (spends less).

    Examples
    --------
    Noise-free tallies (``w = 4``, ``eps = 1``): slot 1 publishes with ``eps/4`` (``r_0 = 0``),
    slot 2 repeats it, the jump at slot 3 publishes with ``eps/8``, the next change with
    ``eps/16``; the window's unspent publication half keeps halving:

    >>> import numpy as np
    >>> from app.dp.local.simulate import run_expected
    >>> m = LBD(d=2, eps=1.0, w=4, users=100_000)
    >>> freqs = [[1, 0], [1, 0], [0.2, 0.8], [0.6, 0.4], [0.6, 0.4]]
    >>> [(r.status, float(r.spent_pub[0])) for r in run_expected(m, freqs)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('publish', 0.25), ('skip', 0.0), ('publish', 0.125), ('publish', 0.0625), ('skip', 0.0)]

    References
    ----------
    X. Ren et al., SIGMOD 2022, §5.3, Algorithm 1; Kellaris et al., PVLDB 2014 (BD).
    """

    name = "lbd"
    version = 1
    population_division = False

    def describe(self) -> str:
        return (
            "LBD: everybody reports each slot with eps/(2w) for dissimilarity; a publication "
            "asks everybody with half of the window's unspent publication half (eps/2)"
        )

    def _dissimilarity_ask(self, t: int, rng: np.random.Generator) -> Ask | None:
        return Ask("dissimilarity", None, [self.ledger.budgets[0].share])  # Alg. 1 l.3-4

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        remaining = self.ledger.budgets[0].half - self.ledger.pub_window(0)  # l.7
        offer = remaining // 2  # l.8
        if offer <= 0 or dis is None or not dis > self._error(offer, self.users):  # l.9-10
            return "skip"  # l.14
        return Ask("publication", None, [offer])  # l.11
