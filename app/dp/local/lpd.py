"""LPD: LDP Population Distribution (LDP-IDS Algorithm 3)."""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.errors import ParameterError
from app.dp.local.base import Ask, LocalMechanism
from app.dp.types import Status


class LPD(LocalMechanism):
    """LDP Population Distribution: each publication asks half of the unused publication users.

    Paper
    -----
    X. Ren et al., SIGMOD 2022, Algorithm 3, lines 1-17 (spec
    ``docs/specs/seed-004-ldp-ids.md`` §3.6).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    U_A                 available buckets of ``population``
    u                   ``unit_users = users // (2w)`` (l.3)
    U_{t,1}             dissimilarity cohort: ``u`` users, uniform (l.3)
    N_rm                ``users // 2 - sum(pub_users)`` (l.7, spec A7)
    N_pp                ``N_rm // 2`` (l.8, spec A7)
    U_{t,2}             publication cohort: ``N_pp`` users, uniform (l.11)
    |U_{i,2}|           ``pub_users``: the last ``w - 1`` publication cohort sizes
    u_min               ``min_users`` (spec A8)
    ==================  ==================================================

    Protocol: dissimilarity round, ``u`` available users at ``eps``; if ``dis > err`` and the
    publication cohort holds at least ``min_users``, a publication round, ``N_pp`` other
    available users at ``eps``; the release is the publication cohort's estimate.

    Parameters
    ----------
    d, eps, w, users, oracle
        As in :class:`~app.dp.local.lbu.LBU`; ``users >= 2w``.
    buckets
        Population buckets (default ``min(users, 2**16)``); at least ``2w``.
    min_users
        ``u_min``: the smallest publication cohort (default 1, spec A8).

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`; the population ages are the ledger.
    pub_users
        Publication cohort sizes of the last ``w - 1`` slots (0 when not published).

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (LDP-IDS Thm 6.2, App. A.5): every report is ``eps``-LDP and no user
    reports twice in any window of ``w`` slots. A cohort is drawn from the available users only,
    and :meth:`~app.dp.local.population.Population.mark` refuses any bucket that reported in
    the last ``w - 1`` slots, so the invariant holds whatever the counts; the counts
    (``w u <= N/2`` on dissimilarity, the halving ``<= N/2`` on publication) only guarantee
    that the cohorts can be filled (spec §4 (iv)-(vi)).

    Deviations
    ----------
    * Cohorts are whole buckets, drawn uniformly among available ones, holding at most the
      target number of users (short by less than one bucket); ``err`` uses the size of the
      publication cohort actually drawn, ``N_pp`` rounded down to buckets.
    * ``P = floor(N/2)``, ``N_pp = floor(N_rm/2)`` (spec A7); ``err = inf`` for an empty
      cohort (A8); exact averaged variance (A2); publish iff ``dis > err`` (A3). The
      publication estimate uses only ``U_{t,2}`` (A32).

    Examples
    --------
    >>> import numpy as np
    >>> from app.dp.local.simulate import run_expected
    >>> m = LPD(d=2, eps=1.0, w=4, users=800)
    >>> freqs = [[1, 0], [1, 0], [0.2, 0.8], [0.6, 0.4], [0.6, 0.4]]
    >>> [(r.status, r.users_dc, r.users_pub) for r in run_expected(m, freqs)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('publish', 100, 200), ('skip', 100, 0), ('publish', 100, 100), ('publish', 100, 50),
     ('skip', 100, 0)]

    References
    ----------
    X. Ren et al., SIGMOD 2022, §6.2, Algorithm 3, Thm 6.2.
    """

    name = "lpd"
    version = 1

    def __init__(
        self,
        d: int,
        eps: float,
        w: int,
        users: int,
        buckets: int | None = None,
        oracle: str = "grr",
        min_users: int = 1,
    ) -> None:
        self.min_users = validate.integer("min_users", min_users)
        super().__init__(d, eps, w, users, buckets, oracle)

    def _validate(self) -> None:
        _check_population(self)

    def _reset(self) -> None:
        super()._reset()
        self.pub_users: deque[int] = deque(maxlen=self.w - 1)

    def describe(self) -> str:
        return (
            "LPD: N/(2w) fresh users per slot report with eps for dissimilarity; a publication "
            "asks half of the window's unused publication users (N/2), each with eps"
        )

    def _dissimilarity_ask(self, t: int, rng: np.random.Generator) -> Ask | None:
        return self._dc_cohort(t, rng)  # Alg. 3 l.3-4

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        remaining = self.users // 2 - sum(self.pub_users)  # l.7
        target = remaining // 2  # l.8
        cohort = self.population.draw(t, target, rng)  # l.11, from U_A
        n = self.population.users_in(cohort)
        if dis is None or n < self.min_users or not dis > self._error(self.full, n):  # l.9-10
            return "skip"  # l.15
        return Ask("publication", cohort, [self.full])  # l.11-13

    def _closed(self, t: int, users_pub: int) -> None:
        if self.w > 1:
            self.pub_users.append(users_pub)  # l.16-17: sizes leave the window with it

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "pub_users": list(self.pub_users)}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.pub_users.clear()
        self.pub_users.extend(int(n) for n in state["pub_users"])


def _check_population(m: LocalMechanism) -> None:
    """LPD/LPA need ``u = floor(N/(2w)) >= 1`` and room for ``2w`` cohorts of buckets."""
    if m.users < 2 * m.w:
        raise ParameterError(f"users must be at least 2w={2 * m.w}, got {m.users}")
    if m.n_buckets < 2 * m.w:
        raise ParameterError(f"buckets must be at least 2w={2 * m.w}, got {m.n_buckets}")
