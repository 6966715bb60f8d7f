"""PLBU: Personalized LDP Budget Uniform (the PWSM paper's local baseline)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from app.dp.errors import ParameterError
from app.dp.local.base import Ask, LocalMechanism, _check_int
from app.dp.local.population import MAX_BUCKETS
from app.dp.oracles import check_choice
from app.dp.types import Group, Status


class PLBU(LocalMechanism):
    """Personalized LBU: every user of group ``g`` reports every slot with ``eps_g / w_g``.

    Paper
    -----
    L. Du et al., PVLDB 18(6), 2025, baseline PLBU ("extends LBU by replacing the inner CDP
    mechanism with an LDP mechanism"), as reconstructed in ``shared/specs/seed-000-pwsm.md``
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

    def __init__(
        self,
        d: int,
        groups: Sequence[Group],
        users: Sequence[int],
        buckets: int | None = None,
        oracle: str = "grr",
    ) -> None:
        _check_int("d", d, 2)
        groups = tuple(groups)
        if not groups or not all(isinstance(g, Group) for g in groups):
            raise ParameterError(f"groups must be a non-empty sequence of Group, got {groups!r}")
        sizes = list(users) if isinstance(users, Sequence) else []
        if len(sizes) != len(groups):
            raise ParameterError(f"users must give one count per group, got {users!r}")
        for n in sizes:
            _check_int("users", n, 1)
        total = sum(int(n) for n in sizes)
        if buckets is not None:
            _check_int("buckets", buckets, 1)
            if buckets > min(total, MAX_BUCKETS):
                raise ParameterError(f"buckets must be at most min(users, {MAX_BUCKETS})")
        self.d, self.groups, self.buckets = int(d), groups, buckets
        self.group_users = [int(n) for n in sizes]
        self.users = total
        self.w = max(g.w for g in groups)
        self.eps = min(g.eps for g in groups)
        self.oracle = check_choice(oracle)
        self._reset()

    def params(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "groups": [[g.w, g.eps] for g in self.groups],
            "users": list(self.group_users),
            "buckets": self.buckets,
            "oracle": self.oracle,
        }

    @classmethod
    def for_stream(cls, d: int, groups: Sequence[Group], **params: Any) -> PLBU:
        return cls(d=d, groups=groups, **params)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {"d": 3, "groups": [Group(4, 1.0), Group(2, 0.5)], "users": [30, 18]}

    def describe(self) -> str:
        return "PLBU: every user of group g reports every slot with eps_g/w_g (budget division)"

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        units = [b.total // b.group.w for b in self.ledger.budgets]  # b_g = eps_g / w_g
        return Ask("publication", None, units)
