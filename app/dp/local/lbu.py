"""LBU: LDP Budget Uniform (LDP-IDS §5.2.1), the budget-division baseline."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from app.dp.local.base import Ask, LocalMechanism
from app.dp.types import Status


class LBU(LocalMechanism):
    """LDP Budget Uniform: every user reports at every slot with ``eps / w``.

    Paper
    -----
    X. Ren et al., "LDP-IDS: Local Differential Privacy for Infinite Data Streams", SIGMOD 2022,
    §5.2.1 (spec ``docs/specs/seed-004-ldp-ids.md`` §3.1, lines 1-2).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    eps, w, N, d        ``eps``, ``w``, ``users``, ``d``
    eps / w             ``full // w`` ledger units per report
    FO                  ``oracle`` (GRR by default, spec A19)
    r_t                 ``last_release`` after ``close_slot``
    ==================  ==================================================

    Protocol: one publication round per slot; cohort: everybody; budget ``eps/w`` per report;
    the release is the oracle's estimate from all reports.

    Parameters
    ----------
    d
        Domain size (>= 2).
    eps, w
        Every user's budget per window of ``w`` slots.
    users
        Registered users ``N`` (indices ``0 .. N-1``).
    buckets
        Population buckets (default ``min(users, 2**16)``); unused by budget division.
    oracle
        ``"grr"``, ``"oue"``, ``"olh"`` or ``"adaptive"`` (per report budget).

    State
    -----
    t, last_release
        Slot counter and the last release.
    ledger
        Exact window ledger (``WindowLedger``) of the units spent per slot.
    population
        Bucket ages (unused by budget division, kept for a uniform layout).
    open
        The slot in progress (pending request, spending so far), or None between slots.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (LDP-IDS Thm 5.1): each user's report at slot ``t`` is ``eps/w``-LDP,
    so every window of ``w`` slots sums to exactly ``eps``; the ledger ``ensure`` s it in exact
    units before any request leaves.

    Deviations
    ----------
    * Releases are the raw frequency estimates, without clipping (spec §3.0).

    Examples
    --------
    >>> import numpy as np
    >>> m = LBU(d=2, eps=1.0, w=4, users=1000)
    >>> rng = np.random.default_rng(3)
    >>> req = m.open_slot(rng)
    >>> req.round, req.cohort, req.oracle, req.eps
    ('publication', None, ('grr',), (0.25,))
    >>> from app.dp.local.wire import Tally
    >>> m.on_tally(Tally(1, "publication", [[550, 450]], [1000]), rng) is None
    True
    >>> r = m.close_slot()
    >>> r.histogram.round(4).tolist(), r.status, float(r.spent_pub[0]), r.users_pub
    ([0.9021, 0.0979], 'publish', 0.25, 1000)

    References
    ----------
    X. Ren et al., SIGMOD 2022, §5.2.1, Thm 5.1.
    """

    name = "lbu"
    version = 1
    population_division = False
    publication_share = Fraction(1)

    def describe(self) -> str:
        return "LBU: every user reports every slot with eps/w (budget division, uniform)"

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        return Ask("publication", None, [self.full // self.w])  # §5.2.1 l.1: all N at eps/w
