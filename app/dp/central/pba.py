"""PBA: Personalized Budget Absorption (PWSM paper, Alg. 5)."""

from __future__ import annotations

from typing import Any

from app.dp.central.pwsm import PWSMMechanism


class PBA(PWSMMechanism):
    """Personalized Budget Absorption: skipped slots lend their shares to the next publication.

    Paper
    -----
    L. Du et al., PVLDB 18(6), 2025, Algorithm 5, lines 1-19, on PWSM (Alg. 2).

    ========================  ===========================================================
    paper                     here
    ========================  ===========================================================
    eps_i / (2 w_i)           one share, ``ledger.budgets[g].share`` units
    l                         ``last_publication`` (0 before any, virtual, spec A10)
    eps^(2)_{i,l}             ``shares[g]`` shares (integer, spec A11)
    t_{i,N}                   ``shares[g] - 1`` (l.4-5)
    max_i t_{i,N}             ``max(shares) - 1`` (l.6, spec A12)
    t_{i,A}, k_g              ``min(t - l - N_g, w_g)`` absorbed shares (l.10-11)
    ========================  ===========================================================

    Parameters
    ----------
    d
        Domain size.
    groups
        The requirement groups ``Group(w, eps)``.
    noise
        ``"laplace"`` or ``"geometric"``.

    State
    -----
    t, last_release, ledger
        As in :class:`~app.dp.central.pbd.PBD`.
    last_publication
        ``l``, the slot of the last fresh release (0 initially).
    shares
        Shares each group spent at ``l`` (1 initially).

    Privacy
    -------
    Neighbours: add-remove at ``sensitivity=1`` (the paper's relation); ``sensitivity=2`` (the
    service's default, ``neighbours: replace``) draws every noise at ``eps / 2``, so a change of
    one user's value is protected at the same eps.
    (w, eps)-EPDP per group (Thm 4.1). DC spends ``eps_g/(2 w_g)`` per slot, ``eps_g/2`` per
    window. A publication at ``l`` spending ``s_g`` shares absorbs the shares of the ``s_g - 1``
    unused slots before it and nullifies the ``max_g s_g - 1`` slots after it (l.7-8), so every
    window of ``w_g`` slots holds at most ``w_g`` shares of publication: ``eps_g / 2``. The
    ledger checks both halves before any noise is drawn.

    Deviations
    ----------
    * The authors' code never updates ``l`` and so never nullifies, overspending the window
      (spec A28); this follows Alg. 5 as written.
    * Shares are stored as integers, not recovered from float budgets (spec A11).
    * The nullification bound is the maximum over groups, as in the paper (spec A12).
    * At t = 1, ``l = 0`` with one share: no nullification, one share offered (spec A10).

    Examples
    --------
    One group ``(w=4, eps=1)``, shares of ``eps/8``: three quiet slots are skipped, the jump at
    slot 4 absorbs their shares (4 shares, ``eps/2``), the next three slots are nullified
    whatever the data, and the drop at slot 8 publishes with one share:

    >>> import numpy as np
    >>> from app.dp.types import Group
    >>> m = PBA(d=2, groups=[Group(4, 1.0)])
    >>> rng = np.random.default_rng(0)
    >>> data, users = [0, 0, 0, 10**6, 10**6, 0, 0, 0], [10**6]  # users: public, for OBS
    >>> [(r.status, int(r.spent_pub[0] * 8)) for r in (m.step([[x, 0]], rng, users) for x in data)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('skip', 0), ('skip', 0), ('skip', 0), ('publish', 4), ('nullified', 0), ('nullified', 0),
     ('nullified', 0), ('publish', 1)]

    References
    ----------
    G. Kellaris et al., PVLDB 7(12), 2014 (Budget Absorption).
    """

    name = "pba"
    version = 1

    def _reset(self) -> None:
        super()._reset()
        self.last_publication = 0
        self.shares = [1] * len(self.budget_groups)

    def describe(self) -> str:
        return (
            "PBA: eps_g/(2w_g) per slot on dissimilarity; a publication absorbs the shares "
            "eps_g/(2w_g) of skipped slots (at most w_g) and nullifies as many slots after it"
        )

    def _offer(self, t: int) -> tuple[list[int], bool]:
        owed = [s - 1 for s in self.shares]  # Alg. 5 l.4-5: t_{i,N}
        if t - self.last_publication <= max(owed):  # l.6-8: nullified slot
            return [0] * len(owed), True
        return [  # l.10-11: absorbed shares, at most w_g
            min(t - self.last_publication - n, b.group.w) * b.share
            for n, b in zip(owed, self.ledger.budgets, strict=True)
        ], False

    def _published(self, t: int, offer: list[int]) -> None:
        self.last_publication = t  # l.17
        self.shares = [u // b.share for u, b in zip(offer, self.ledger.budgets, strict=True)]

    def _state(self) -> dict[str, Any]:
        state = super()._state()
        return {**state, "last_publication": self.last_publication, "shares": self.shares}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.last_publication = int(state["last_publication"])
        self.shares = [int(s) for s in state["shares"]]
