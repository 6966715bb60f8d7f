"""LBA: LDP Budget Absorption (LDP-IDS Algorithm 2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.dp.local.base import Ask, LocalMechanism
from app.dp.types import Status


class LBA(LocalMechanism):
    """LDP Budget Absorption: a publication absorbs skipped slots' shares, then nullifies.

    Paper
    -----
    X. Ren et al., SIGMOD 2022, Algorithm 2, lines 1-17 (spec
    ``docs/specs/seed-004-ldp-ids.md`` §3.5).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    eps / (2w)          one share, ``ledger.budgets[0].share`` units
    l                   ``last_publication`` (0 initially)
    eps_{l,2}           ``last_shares`` shares (0 initially, spec A4)
    t_N                 ``last_shares - 1`` (l.5)
    t_A, eps_{t,2}      ``t - (l + t_N)``; ``min(t_A, w)`` shares (l.9-10)
    ==================  ==================================================

    Protocol: dissimilarity round at every slot (also nullified ones, spec A30), everybody at
    ``eps/(2w)``; unless nullified, if ``dis > err`` a publication round, everybody at
    ``min(t_A, w)`` shares.

    Parameters
    ----------
    d, eps, w, users, buckets, oracle
        As in :class:`~app.dp.local.lbu.LBU`.

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`.
    last_publication, last_shares
        ``l`` and the shares its publication spent.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (LDP-IDS App. A.3 (2)): ``eps/2`` per window on dissimilarity; a
    publication with ``k`` shares absorbs ``k - 1`` unspent slots before it and nullifies the
    ``k - 1`` after it, so a window holds at most ``w`` shares of publication, ``eps/2``. The
    exact ledger ``ensure`` s both halves before any request.

    Deviations
    ----------
    * Literal initialisation ``l = 0, eps_{l,2} = 0`` (spec A4): the first publication may
      absorb a phantom slot 0; the window sums still hold (the ledger checks them).
    * ``D_{t,2}`` for the publication reports (spec A5); ``eps_{l,2}`` is stored (spec A6).

    Examples
    --------
    >>> import numpy as np
    >>> from app.dp.local.simulate import run_expected
    >>> m = LBA(d=2, eps=1.0, w=4, users=100_000)
    >>> freqs = [[1, 0]] * 3 + [[0.2, 0.8]] * 3 + [[0.9, 0.1]] * 2
    >>> [(r.status, int(r.spent_pub[0] * 8)) for r in run_expected(m, freqs)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('publish', 2), ('nullified', 0), ('skip', 0), ('publish', 2), ('nullified', 0),
     ('skip', 0), ('publish', 2), ('nullified', 0)]

    References
    ----------
    X. Ren et al., SIGMOD 2022, §5.3, Algorithm 2; Kellaris et al., PVLDB 2014 (BA).
    """

    name = "lba"
    version = 1
    population_division = False

    def _reset(self) -> None:
        super()._reset()
        self.last_publication = 0
        self.last_shares = 0

    def describe(self) -> str:
        return (
            "LBA: everybody reports each slot with eps/(2w) for dissimilarity; a publication "
            "absorbs the shares eps/(2w) of skipped slots (at most w) and nullifies as many"
        )

    def _dissimilarity_ask(self, t: int, rng: np.random.Generator) -> Ask | None:
        return Ask("dissimilarity", None, [self.ledger.budgets[0].share])  # l.3

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        nullified = self.last_shares - 1  # l.5: t_N
        if t - self.last_publication <= nullified:  # l.6-7
            return "nullified"
        shares = min(t - (self.last_publication + nullified), self.w)  # l.9-10
        offer = shares * self.ledger.budgets[0].share
        if dis is None or not dis > self._error(offer, self.users):  # l.11-12
            return "skip"  # l.17
        return Ask("publication", None, [offer])  # l.13

    def _published(self, t: int, ask: Ask) -> None:
        self.last_publication = t  # l.15
        self.last_shares = ask.units[0] // self.ledger.budgets[0].share

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "l": self.last_publication, "k": self.last_shares}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.last_publication = int(state["l"])
        self.last_shares = int(state["k"])
