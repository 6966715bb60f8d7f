"""LPA: LDP Population Absorption (LDP-IDS Algorithm 4)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.dp.local.base import Ask, LocalMechanism
from app.dp.local.lpd import _check_population
from app.dp.types import Status


class LPA(LocalMechanism):
    """LDP Population Absorption: a publication absorbs skipped slots' users, then nullifies.

    Paper
    -----
    X. Ren et al., SIGMOD 2022, Algorithm 4, lines 1-18 (spec
    ``docs/specs/seed-004-ldp-ids.md`` §3.7).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    u                   ``unit_users = users // (2w)``
    l                   ``last_publication`` (0 initially)
    |U_{l,2}| / u       ``last_units`` (0 initially, spec A4)
    t_N                 ``last_units - 1`` (l.5)
    t_A, N_pp           ``t - (l + t_N)``; ``u * min(t_A, w)`` users (l.9-10)
    ==================  ==================================================

    Protocol: dissimilarity round at every slot (also nullified ones, spec A30), ``u`` available
    users at ``eps``; unless nullified, if ``dis > err`` a publication round, ``N_pp`` other
    available users at ``eps``.

    Parameters
    ----------
    d, eps, w, users, oracle
        As in :class:`~app.dp.local.lbu.LBU`; ``users >= 2w``.
    buckets
        Population buckets (default ``min(users, 2**16)``); at least ``2w``.

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`; the population ages are the ledger.
    last_publication, last_units
        ``l`` and the units of ``u`` users its publication took.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    w-event ``eps``-LDP (LDP-IDS Thm 6.2, App. A.5): every report is ``eps``-LDP and the
    population ledger refuses any bucket that reported in the last ``w - 1`` slots, so no user
    reports twice in a window. Absorption and nullification keep a window's publication users
    at most ``w u`` (spec §4 (v)), which guarantees the cohorts can be filled.

    Deviations
    ----------
    * Literal initialisation ``l = 0``, ``|U_{l,2}| = 0`` (spec A4: the paper's ``eps_{l,2}``).
    * ``D_{t,2}`` for the publication reports (A5); ``|U_{l,2}|`` stored as units (A6).
    * Whole-bucket cohorts and ``err`` on the drawn size, as in :class:`~app.dp.local.lpd.LPD`.

    Examples
    --------
    >>> import numpy as np
    >>> from app.dp.local.simulate import run_expected
    >>> m = LPA(d=2, eps=1.0, w=4, users=800)
    >>> freqs = [[1, 0]] * 3 + [[0.2, 0.8]] * 3 + [[0.9, 0.1]] * 2
    >>> [(r.status, r.users_dc, r.users_pub) for r in run_expected(m, freqs)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('publish', 100, 200), ('nullified', 100, 0), ('skip', 100, 0), ('publish', 100, 200),
     ('nullified', 100, 0), ('skip', 100, 0), ('publish', 100, 200), ('nullified', 100, 0)]

    References
    ----------
    X. Ren et al., SIGMOD 2022, §6.2, Algorithm 4, Thm 6.2.
    """

    name = "lpa"
    version = 1

    def _validate(self) -> None:
        _check_population(self)

    def _reset(self) -> None:
        super()._reset()
        self.last_publication = 0
        self.last_units = 0

    def describe(self) -> str:
        return (
            "LPA: N/(2w) fresh users per slot report with eps for dissimilarity; a publication "
            "absorbs the N/(2w) users of skipped slots (at most w units) and nullifies as many"
        )

    def _dissimilarity_ask(self, t: int, rng: np.random.Generator) -> Ask | None:
        return self._dc_cohort(t, rng)  # Alg. 4 l.3

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        nullified = self.last_units - 1  # l.5: t_N
        if t - self.last_publication <= nullified:  # l.6-7
            return "nullified"
        units = min(t - (self.last_publication + nullified), self.w)  # l.9
        cohort = self.population.draw(t, self.unit_users * units, rng)  # l.10, l.13
        n = self.population.users_in(cohort)
        if dis is None or n < 1 or not dis > self._error(self.full, n):  # l.11-12
            return "skip"  # l.17
        return Ask("publication", cohort, [self.full])  # l.13-14

    def _published(self, t: int, ask: Ask) -> None:
        nullified = self.last_units - 1
        self.last_units = min(t - (self.last_publication + nullified), self.w)  # l.15: k_l
        self.last_publication = t

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "l": self.last_publication, "k": self.last_units}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.last_publication = int(state["l"])
        self.last_units = int(state["k"])
