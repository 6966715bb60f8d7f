"""PLPD: PLDP Population Distribution (PLDP-IDS Algorithm 5)."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.local.base import Ask
from app.dp.local.ops import SplitRule
from app.dp.local.pldp import PLDPMechanism
from app.dp.types import Group, Status


class PLPD(PLDPMechanism):
    """PLDP Population Distribution: LPD at ``W = w_max`` with every user's own ``eps_i`` and PFO.

    Paper
    -----
    L. Du et al., *PLDP-IDS: Personalized Local Differential Privacy for Infinite Data Stream*,
    §IV.B, Algorithm 5, lines 1-14 (spec ``docs/specs/seed-002-pldp-ids.md`` §3.3).

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w_i, eps_i)        ``groups[k]`` of the ``users[k]`` users of level k
    w_max = W           ``window`` (= ``w``)
    z                   ``unit = users // (2 w_max)`` (spec A4)
    U_A                 available buckets of ``population``
    U_{s,t}             dissimilarity cohort: ``z`` users, uniform (l.1)
    f̂_{s,t}, dis        PFO estimate (projected) and Eq. 3 (l.3-4)
    n_r, n_pp           ``users // 2 - sum(pub_users)``, ``n_r // 2`` (l.5-6)
    err                 Eq. 7 with the population's budget mix (l.7)
    n_min               ``min_users`` (10, spec A8)
    U_{r,t}             publication cohort (l.9)
    ==================  ==================================================

    Protocol: a dissimilarity round (``z`` users, each at its own ``eps_i``); if ``dis > err``
    and ``n_pp >= n_min``, a publication round (``n_pp`` other available users at ``eps_i``);
    the release is the publication cohort's projected PFO estimate.

    Parameters
    ----------
    d
        Domain size (>= 2).
    groups
        The requirement levels ``Group(w_i, eps_i)``; or ``eps`` and ``w`` for one level.
    users
        Users per level (indices assigned in blocks); ``sum(users) >= 2 max(w)``.
    buckets
        Population buckets (default ``min(users, 2**16)``); at least ``2W``.
    split_rule
        OPS split rule (variants with OPS only): ``"safe_max"`` (default) or ``"paper_ceil_z"``.
    dis_on_raw
        Compute ``dis`` on the raw instead of the projected ``f̂_{s,t}`` (spec A24).
    min_users
        ``n_min``: the smallest publication cohort (default 10).

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lpd.LPD`; the population holds the ages under ``W`` and the
        last report slots of every bucket (each user's own window).
    pub_users
        Publication cohort sizes of the last ``W - 1`` slots.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    Personalized w-event LDP, ``(w_i, eps_i)`` for every user (Thm IV.2, Lemma IX.4): every
    report is GRR at the user's own ``eps_i`` and no user reports twice within
    ``W = w_max >= w_i`` slots, so every window of ``w_i`` slots holds at most one report
    (spec I1, I2). The population ledger refuses any bucket that reported in the last
    ``W - 1`` slots or whose users would exceed their own ``eps_i`` in their own ``w_i``.

    Deviations
    ----------
    * ``z = floor(n/(2 w_max))`` (A4); ``f̂_0 = 0`` (A22); estimates projected onto the simplex,
      ``dis`` too unless ``dis_on_raw`` (A24); ``dis`` subtracts ``V_PLDP / d`` of the
      dissimilarity reports without a sampling term (A25); PFO.A divides by the group size (A3).
    * Cohorts are whole buckets (at most the target size, short by less than one bucket);
      ``err`` uses the drawn cohort's size with the population's budget mix (A26).

    Examples
    --------
    Example 6's schedule (n = 1000, w_max = 4, z = 125): publications of 250, 125, then 62
    users when ``n_r = 500 - (250 + 125)``.

    >>> from app.dp.local.simulate import run_expected
    >>> from app.dp.types import Group
    >>> levels = [Group(4, 0.5), Group(2, 1.0), Group(3, 1.5), Group(1, 2.0)]
    >>> m = PLPD(d=5, groups=levels, users=[350, 250, 250, 150])
    >>> freqs = [[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0]]
    >>> [(r.status, r.users_dc, r.users_pub) for r in run_expected(m, freqs)]
    ... # doctest: +NORMALIZE_WHITESPACE
    [('publish', 125, 250), ('publish', 125, 125), ('skip', 125, 0), ('publish', 125, 62)]

    References
    ----------
    L. Du et al., PLDP-IDS, §IV.B, Algorithm 5, Thm IV.2; X. Ren et al., SIGMOD 2022, Alg. 3.
    """

    name = "plpd"
    version = 1

    def __init__(
        self,
        d: int,
        groups: Sequence[Group] | None = None,
        users: Sequence[int] | int | None = None,
        buckets: int | None = None,
        split_rule: SplitRule = "safe_max",
        dis_on_raw: bool = False,
        min_users: int = 10,
        *,
        eps: float | None = None,
        w: int | None = None,
    ) -> None:
        self.min_users = validate.integer("min_users", min_users)
        super().__init__(d, groups, users, buckets, split_rule, dis_on_raw, eps=eps, w=w)

    def _reset(self) -> None:
        super()._reset()
        self.pub_users: deque[int] = deque(maxlen=self.window - 1)

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        remaining = self.users // 2 - sum(self.pub_users)  # Alg. 5 l.5 (tau <= 0 adds 0)
        target = remaining // 2  # l.6: n_pp
        cohort = self.population.draw(t, target, rng)  # l.9 (Alg. 3 l.15: drawn first)
        n = self.population.users_in(cohort)
        if dis is None or n < self.min_users or not dis > self.publication_error(cohort):  # l.8
            return "skip"  # l.12
        return self._publish_ask(cohort)  # l.9-11

    def _closed(self, t: int, users_pub: int) -> None:
        if self.window > 1:
            self.pub_users.append(users_pub)  # l.13: sizes leave the window with their users

    def _state(self) -> dict[str, Any]:
        return {**super()._state(), "pub_users": list(self.pub_users)}

    def _load(self, state: dict[str, Any]) -> None:
        super()._load(state)
        self.pub_users.clear()
        self.pub_users.extend(int(n) for n in state["pub_users"])

    def describe(self) -> str:
        return (
            "PLPD: N/(2 w_max) fresh users per slot report at their own eps_i for dissimilarity; "
            "a publication asks half of the window's unused publication users (N/2); "
            + self.describe_levels()
        )
