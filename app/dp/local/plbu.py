"""PLBU: Personalized LDP Budget Uniform (the PWSM paper's local baseline)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from app.dp import validate
from app.dp.local.base import Ask, LocalMechanism, check_buckets, check_users
from app.dp.oracles import check_choice
from app.dp.types import Group, Status


class PLBU(LocalMechanism):
    """Personalized LBU: every user of group ``g`` reports every slot with ``eps_g / w_g``.

    Paper
    -----
    L. Du et al., PVLDB 18(6), 2025, baseline PLBU ("extends LBU by replacing the inner CDP
    mechanism with an LDP mechanism"), as reconstructed in ``docs/specs/seed-000-pwsm.md``
    §2.11; LBU is Ren et al., SIGMOD 2022, §5.2.1.

    ==================  ==================================================
    paper               here
    ==================  ==================================================
    (w_g, eps_g)        ``groups[g]``
    n_g                 ``users[g]``: users with indices in the g-th block
    b_g = eps_g / w_g   ``2 * 2**40`` units of group ``g`` per report
    r_t = sum_g C_g     frequencies ``sum_g n_g c_g / sum_g n_g``
    ==================  ==================================================

    Protocol: one publication round per slot; cohort: everybody; one oracle and budget per group
    in the request (a device picks its group's entry); the release combines the group
    estimates weighted by their reports.

    Parameters
    ----------
    d
        Domain size (>= 2).
    groups
        The requirement groups ``Group(w, eps)``.
    users
        Registered users per group; user indices ``0 .. sum(users)-1`` are assigned to the groups
        in order (the first ``users[0]`` to group 0, ...).
    buckets
        Population buckets (default ``min(sum(users), 2**16)``); unused by budget division.
    oracle
        ``"grr"``, ``"oue"``, ``"olh"`` or ``"adaptive"`` (chosen per group budget).

    State
    -----
    t, last_release, ledger, population, open
        As in :class:`~app.dp.local.lbu.LBU`, with one ledger row per group.

    Privacy
    -------
    Neighbours: replace: each report perturbs the user's value itself, so any change of the
    value is protected at the eps the report spends (the relation local DP always has).
    Personalized w-event LDP: a user of group ``g`` spends ``eps_g / w_g`` per slot, so each of
    its windows of ``w_g`` slots sums to exactly ``eps_g`` (spec seed-000 §4, PLBU). The exact
    ledger ``ensure`` s every group's window before a request leaves.

    Deviations
    ----------
    * Reconstructed (spec seed-000 A29, §2.11): GRR by default; releases frequencies.

    Examples
    --------
    >>> import numpy as np
    >>> from app.dp.local.wire import Tally
    >>> m = PLBU(d=2, groups=[Group(2, 1.0), Group(4, 2.0)], users=[300, 700])
    >>> req = m.open_slot(np.random.default_rng(0))
    >>> req.eps, req.units == (2 << 40, 2 << 40)
    ((0.5, 0.5), True)
    >>> _ = m.on_tally(Tally(1, "publication", [[170, 130], [420, 280]], [300, 700]), None)
    >>> m.close_slot().histogram.round(3).tolist()
    [0.867, 0.133]

    References
    ----------
    L. Du et al., PVLDB 18(6), 2025, §6 (baselines); X. Ren et al., SIGMOD 2022, §5.2.1.
    """

    name = "plbu"
    version = 1
    population_division = False
    publication_share = Fraction(1)
    param_attrs = {"users": "group_users"}

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        users: Sequence[int],
        buckets: int | None = None,
        oracle: str = "grr",
    ) -> None:
        self.d = validate.integer("d", d, 2)
        self.groups = groups = validate.sequence("groups", groups, Group)
        self.group_users = check_users(users, len(groups))
        self.users = sum(self.group_users)
        self.buckets = check_buckets(buckets, self.users)
        self.w = max(g.w for g in groups)
        self.eps = min(g.eps for g in groups)
        self.oracle = check_choice(oracle)
        self._reset()

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {"d": 3, "groups": [Group(4, 1.0), Group(2, 0.5)], "users": [30, 18]}

    def describe(self) -> str:
        return "PLBU: every user of group g reports every slot with eps_g/w_g (budget division)"

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        units = [b.total // b.group.w for b in self.ledger.budgets]  # b_g = eps_g / w_g
        return Ask("publication", None, units)
