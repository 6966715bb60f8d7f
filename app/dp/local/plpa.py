"""PLPA: PLDP Population Absorption (PLDP-IDS Algorithm 6)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.dp.local.base import Ask
from app.dp.local.pldp import PLDPMechanism
from app.dp.types import Status


class PLPA(PLDPMechanism):
    """PLDP Population Absorption: LPA at ``W = w_max`` with every user's own ``eps_i`` and PFO.

    Paper
    -----
    L. Du et al., *PLDP-IDS: Personalized Local Differential Privacy for Infinite Data Stream*,
    §IV.C, Algorithm 6, lines 1-17 (spec ``docs/specs/seed-002-pldp-ids.md`` §3.4).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w_i, eps_i)        ``groups[k]`` of the ``users[k]`` users of level k
    w_max = W           ``window`` (= ``w``)
    z                   ``unit = users // (2 w_max)`` (spec A4)
    l                   ``last_publication`` (0 initially, spec A23)
    |U_{r,l}| / z       ``last_units`` (0 initially)
    t_N, t_A            ``last_units - 1``; ``t - l - t_N`` (l.5, l.9)
    n_pp                ``z min(t_A, W)`` (l.10)
    err                 Eq. 7 with the population's budget mix (l.11)
    ==================  ==================================================

    Protocol: a dissimilarity round at every slot (also nullified ones), ``z`` users at their
    own ``eps_i``; unless nullified, if ``dis > err`` a publication round of ``n_pp`` other
    available users at ``eps_i``.

    Parameters
    ----------
    d, groups, users, buckets, split_rule, dis_on_raw
        As in :class:`~app.dp.local.plpd.PLPD` (no ``min_users``: Alg. 6 has no ``n_min``).

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.plpd.PLPD`.
    l, k
        ``last_publication`` and ``last_units`` (in units of ``z`` users).

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    Personalized w-event LDP, ``(w_i, eps_i)`` for every user (Thm IV.2, Lemma IX.4): every
    report is GRR at the user's own ``eps_i``, no user reports twice within
    ``W = w_max >= w_i`` slots (spec I1, I2), and absorption with nullification keeps a
    window's publication users at most ``W z <= n/2`` (I4), so the cohorts can be filled. The
    population ledger refuses any bucket that would break either window.

    Deviations
    ----------
    * ``t - l <= t_N`` (A6, as Alg. 4 and LPA); ``l`` and ``|U_{r,l}|`` stored at every
      publication (A7); ``l = 0`` initially (A23), so a first publication takes two units.
    * As :class:`~app.dp.local.plpd.PLPD` for ``z``, ``f̂_0``, projection, ``dis`` and cohorts.

    Examples
    --------
    Example 7's start (n = 1000, w_max = 4, z = 125): the first publication absorbs two units
    (250 users), the next slot is nullified.

    >>> from app.dp.local.simulate import run_expected
    >>> from app.dp.types import Group
    >>> levels = [Group(4, 0.5), Group(2, 1.0), Group(3, 1.5), Group(1, 2.0)]
    >>> m = PLPA(d=5, groups=levels, users=[350, 250, 250, 150])
    >>> freqs = [[1, 0, 0, 0, 0]] * 3 + [[0, 0, 1, 0, 0]] * 2
    >>> [(r.status, r.users_dc, r.users_pub) for r in run_expected(m, freqs)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('publish', 125, 250), ('nullified', 125, 0), ('skip', 125, 0), ('publish', 125, 250),
     ('nullified', 125, 0)]

    References
    ----------
    L. Du et al., PLDP-IDS, §IV.C, Algorithm 6, Thm IV.2; X. Ren et al., SIGMOD 2022, Alg. 4.
    """

    name = "plpa"
    version = 1

    def _reset(self) -> None:
        super()._reset()
        self.last_publication = 0  # l, spec A23
        self.last_units = 0  # |U_{r,l}| / z

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        nullified = self.last_units - 1  # Alg. 6 l.5: t_N
        if t - self.last_publication <= nullified:  # l.6-7 ("<=", spec A6)
            return "nullified"
        units = min(t - self.last_publication - nullified, self.window)  # l.9-10
        cohort = self.population.draw(t, self.unit * units, rng)  # l.13 (Alg. 4 l.10: first)
        if dis is None or not dis > self.publication_error(cohort):  # l.11-12, no n_min
            return "skip"  # l.15
        return self._publish_ask(cohort)  # l.13

    def _published(self, t: int, ask: Ask) -> None:
        nullified = self.last_units - 1
        self.last_units = min(t - self.last_publication - nullified, self.window)  # l.14, A7
        self.last_publication = t

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "l": self.last_publication, "k": self.last_units}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.last_publication = int(state["l"])
        self.last_units = int(state["k"])

    def describe(self) -> str:
        return (
            "PLPA: N/(2 w_max) fresh users per slot report at their own eps_i for dissimilarity; "
            "a publication absorbs the z users of skipped slots (at most W units) and nullifies "
            "as many; " + self.describe_levels()
        )
