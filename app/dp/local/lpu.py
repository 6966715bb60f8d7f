"""LPU: LDP Population Uniform (LDP-IDS §6.1), the population-division baseline."""

from __future__ import annotations

import numpy as np

from app.dp.errors import ParameterError
from app.dp.local.base import Ask, LocalMechanism
from app.dp.types import Status


class LPU(LocalMechanism):
    """LDP Population Uniform: ``w`` fixed user groups take turns, each reporting with ``eps``.

    Paper
    -----
    X. Ren et al., SIGMOD 2022, §6.1 (spec ``docs/specs/seed-004-ldp-ids.md`` §3.3).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    G_0 .. G_{w-1}      buckets ``b`` with ``b mod w == g``
    g = (t - 1) mod w   the cohort of slot ``t``
    FO(D_{G_g}, eps)    the publication round's estimate
    ==================  ==================================================

    Protocol: one publication round per slot; cohort: group ``(t - 1) mod w``; budget ``eps``
    per report; the release is the estimate from that group.

    Parameters
    ----------
    d, eps, w, users, oracle
        As in :class:`~app.dp.local.lbu.LBU`.
    buckets
        Population buckets (default ``min(users, 2**16)``); at least ``w``.

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`; the population ages are the ledger.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (LDP-IDS Thm 6.2): a user belongs to one group, which reports once
    every ``w`` slots with ``eps``, so every window holds at most one ``eps``-LDP report per
    user; the population ledger refuses any bucket asked twice in ``w`` slots.

    Deviations
    ----------
    * The partition is fixed by registration index (bucket ``i mod buckets``, group ``bucket
      mod w``) rather than drawn at random at start (spec A17): registration is independent
      of the values, and the constructor takes no generator.

    Examples
    --------
    >>> import numpy as np
    >>> m = LPU(d=2, eps=1.0, w=3, users=10)
    >>> req = m.open_slot(np.random.default_rng(0))
    >>> req.cohort_buckets().tolist(), [u for u in range(10) if req.asks(u)]
    ([0, 3, 6, 9], [0, 3, 6, 9])

    References
    ----------
    X. Ren et al., SIGMOD 2022, §6.1, Thm 6.1-6.2.
    """

    name = "lpu"
    version = 1

    def _validate(self) -> None:
        if self.n_buckets < self.w:
            raise ParameterError(f"buckets must be at least w={self.w}, got {self.n_buckets}")

    def describe(self) -> str:
        return "LPU: w fixed user groups report in turn, one per slot, each with the full eps"

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        group = (t - 1) % self.w  # §6.1: G_{(t-1) mod w} reports with eps
        cohort = np.arange(group, self.n_buckets, self.w, dtype=np.int64)
        return Ask("publication", cohort, [self.full])
