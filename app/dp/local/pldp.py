"""The framework every PLDP-IDS population mechanism shares (spec §3.0).

Paper: L. Du et al., *PLDP-IDS*, §IV.B-§V.C (Algs. 3-6). Reading aid:
``docs/specs/seed-002-pldp-ids.md`` §3.0, §2.5, §3.3-§3.7.

Every user ``i`` holds a requirement level ``(w_i, eps_i)``; the levels are the stream's
requirement groups, and ``users[k]`` users hold level ``k`` (indices assigned in blocks, as for
:class:`~app.dp.local.plbu.PLBU`). Per slot, as in LDP-IDS's population division:

* M_s: ``z`` available users report with GRR at their own report budget ``eps'_i``; the
  service estimates ``f_s`` with PFO (:mod:`app.dp.local.pfo`; for the ``+`` variants after
  PUE, :mod:`app.dp.local.pue`) and ``dis = mean((f_s - f_{t-1})**2) - V_PLDP / d`` (Eq. 3,
  spec §2.5, A25);
* M_r: if ``dis > err`` (Eq. 7) for a candidate publication cohort, that cohort reports and its
  PFO estimate is released; otherwise the last release is repeated;
* recycling: a user who reported at ``tau`` is available again at ``tau + W``.

The subclasses decide ``W``, ``z``, the budget shares and the publication rule:
:class:`~app.dp.local.plpd.PLPD` / :class:`~app.dp.local.plpa.PLPA` (``W = w_max``,
``z = floor(n / (2 w_max))``, full ``eps_i``), :class:`~app.dp.local.plpd_plus.PLPDPlus` /
:class:`~app.dp.local.plpa_plus.PLPAPlus` (OPS and PUE) and the ablations
(:mod:`app.dp.local.pldp_ablations`).

A collection request carries one entry per level: the report budget ``eps'_k`` as a float and in
the level's exact ledger units (``floor(total_k / s_k)``, so ``s_k`` reports never exceed
``eps_k`` on a device's :class:`~app.dp.budget.SlotLedger`). The population ledger
(:class:`~app.dp.local.personal_population.PersonalPopulation`) enforces both ``W`` and every
user's own window.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.budget import GroupBudget
from app.dp.errors import ParameterError
from app.dp.interfaces import LevelUse
from app.dp.local.base import Ask, LocalMechanism, ProtocolError, check_buckets, check_users
from app.dp.local.ops import SPLIT_RULES, OPSResult, SplitRule, ops
from app.dp.local.personal_population import PersonalPopulation
from app.dp.local.pfo import estimate, merge, pldp_variance, project_simplex, report_error
from app.dp.local.pue import pue
from app.dp.local.wire import CollectionRequest, Tally
from app.dp.types import FloatArray, Group, IntArray


class PLDPMechanism(LocalMechanism):
    """Base of PLPD, PLPA, PLPD+, PLPA+ and the ablations; see the module docstring."""

    personalized: ClassVar[bool] = True
    use_ops: ClassVar[bool] = False
    """Choose ``W``, ``z`` and the budget shares with OPS (Alg. 1) instead of ``w_max``."""
    use_pue: ClassVar[bool] = False
    """Pool re-perturbed reports of higher budgets into lower groups (Alg. 2)."""
    candidate_err: ClassVar[bool] = False
    """``err`` from the drawn candidate's budget mix (Alg. 3/4) instead of the population's."""
    param_attrs = {"users": "group_users", "eps": None, "w": None}
    """``users`` is kept per level; ``eps`` and ``w`` only spell a one-level ``groups``."""

    def __init__(
        self,
        d: int,
        groups: Sequence[Group] | None = None,
        users: Sequence[int] | int | None = None,
        buckets: int | None = None,
        split_rule: SplitRule = "safe_max",
        dis_on_raw: bool = False,
        *,
        eps: float | None = None,
        w: int | None = None,
    ) -> None:
        self.d = validate.integer("d", d, 2)
        if groups is None:  # the homogeneous case (w_i, eps_i) = (w, eps): LDP-IDS
            groups = [Group(validate.integer("w", w), validate.positive("eps", eps))]
        elif eps is not None or w is not None:
            raise ParameterError("give either groups or (eps, w), not both")
        levels = validate.sequence("groups", groups, Group)
        if isinstance(users, int) and not isinstance(users, bool) and len(levels) == 1:
            users = [users]
        self.groups = levels
        self.group_users = check_users(users, len(levels))
        self.users = sum(self.group_users)
        self.split_rule: SplitRule = validate.choice("split_rule", split_rule, SPLIT_RULES)
        self.dis_on_raw = validate.flag("dis_on_raw", dis_on_raw)
        self.w = max(g.w for g in levels)
        self.eps = min(g.eps for g in levels)
        self.oracle = "grr"
        if self.users < 2 * self.w:
            raise ParameterError(f"users must total at least 2 max(w)={2 * self.w}, got {users!r}")
        self.buckets = check_buckets(buckets, self.users)
        self._setup()
        if self.n_buckets < 2 * self.window:
            raise ParameterError(
                f"buckets must be at least 2W={2 * self.window}, got {self.n_buckets}"
            )
        self._reset()

    def _setup(self) -> None:
        """``W``, the unit ``z`` and the shares ``s_k`` (Alg. 5/6 setup, or OPS for Alg. 3/4)."""
        self.selection: OPSResult | None = None
        if self.use_ops:
            self.selection = ops(self.groups, self.group_users, self.d, self.split_rule)
            assert self.selection.window is not None
            self.window: int = self.selection.window  # spec A9
            self.unit: int = self.selection.z_opt
            self.shares: tuple[int, ...] = self.selection.shares
        else:
            self.window = self.w  # W = w_max
            self.unit = self.users // (2 * self.w)  # z = floor(n / (2 w_max)), spec A4
            self.shares = (1,) * len(self.groups)
        totals = [GroupBudget(g).total for g in self.groups]  # eps_k in exact units
        self.report_units = [t // s for t, s in zip(totals, self.shares, strict=True)]

    def _reset(self) -> None:
        super()._reset()
        self.population: PersonalPopulation = PersonalPopulation(
            self.group_users, self.n_buckets, self.window, self.groups, self.shares
        )
        self.report_eps = [
            b.to_eps(u) for b, u in zip(self.ledger.budgets, self.report_units, strict=True)
        ]
        self._eps_cache: dict[tuple[int, int], float] = {}

    def _eps(self, units: list[int]) -> FloatArray:
        """Budget per level of a round's units (cached: a level only ever asks its own)."""
        cache = self._eps_cache
        out = []
        for g, u in enumerate(units):
            if (g, u) not in cache:
                cache[g, u] = self.ledger.budgets[g].to_eps(u)
            out.append(cache[g, u])
        return np.array(out)

    def weaker_guarantee(self) -> str | None:
        """The paper's OPS split (``split_rule="paper_ceil_z"``, spec A10) plans more reports
        per window than a level's ``eps_i`` allows: the population ledger refuses those rounds
        at run time, so the service skips slots (refused without
        ``accept_weaker_guarantee``)."""
        if self.use_ops and self.split_rule == "paper_ceil_z":
            return (
                "split_rule=paper_ceil_z: OPS plans up to 1.5 eps_i per window; the population "
                "ledger refuses those rounds and their slots are skipped"
            )
        return None

    @property
    def unit_users(self) -> int:
        """``z``: the dissimilarity cohort per slot and the absorption unit."""
        return self.unit

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {
            "d": 3,
            "groups": [Group(4, 1.0), Group(2, 0.5), Group(3, 2.0)],
            "users": [30, 18, 24],
        }

    # -- M_s, PFO and PUE --------------------------------------------------------------------

    def _dissimilarity_ask(self, t: int, rng: np.random.Generator) -> Ask | None:
        cohort = self.population.draw(t, self.unit, rng)  # Alg. 5 l.1 / Alg. 3 l.4: z users
        return Ask("dissimilarity", cohort, list(self.report_units))

    def _asked(self, ask: Ask) -> IntArray:
        if ask.cohort is None:
            return self.population.level_totals()
        return self.population.users_in_levels(ask.cohort)

    def assign(self, levels: npt.ArrayLike) -> None:
        """Take every user's level (index, or :data:`~app.dp.local.wire.SITS_OUT`) for the next
        slot; only between slots. ``users`` stays the planned mix OPS chose ``W``, ``z`` and
        the shares for: a user's own window holds whatever the mix (the shares and ``W`` bound
        its reports per ``w_k``, and the population ledger checks it), only utility moves. A
        user who changes level must first sit out (:data:`~app.dp.local.wire.SITS_OUT`) for
        ``max(w_old, w_new)`` slots: the caller keeps that rule (the service's
        ``app.stream.release.local_levels``), as the window checks see only the level a bucket
        holds."""
        if self._open is not None:
            raise ProtocolError("levels change only between slots")
        self.population.assign(levels)

    def takes_levels(self) -> bool:
        """Yes: every user's level arrives before each slot (:meth:`assign`)."""
        return True

    def report_windows(self) -> tuple[IntArray, IntArray]:
        """Per level ``k``, ``(w_k, s_k)``: every user is held to its own level's window and to
        its ``shares`` (OPS's split of ``eps_k``; 1 without OPS)."""
        w = np.array([g.w for g in self.groups], dtype=np.int64)
        return w, np.array(self.shares, dtype=np.int64)

    def _window_units(self, g: int) -> int:
        """The most units a user of level ``g`` spent in the window of its own ``w_g`` slots:
        its bucket's reports in the window (the ledger keeps the last ``max(s)`` of them) times
        ``eps_g / s_g``, over the buckets that hold users of the level."""
        pop = self.population
        last = max(self.t, pop.t)
        held = pop.level_sizes[g] > 0
        reports = (pop.history[held] > last - self.groups[g].w).sum(axis=1)
        return int(reports.max(initial=0)) * self.report_units[g]

    def report_budget(self, level: int) -> float:
        """A report at ``level`` spends ``eps_k / s_k`` (the OPS share), or ``eps_k``."""
        return float(self.report_eps[level])

    def level_use(self) -> LevelUse:
        """Users per level and those available at the population ledger's slot."""
        pop = self.population
        totals, free = pop.level_use(pop.t)
        return LevelUse(totals.tolist(), free.tolist(), pop.sitting_out())

    def _level_vector(self) -> bytes:
        return self.population.assignment.tobytes()

    def pfo(self, tally: Tally, rng: np.random.Generator) -> tuple[FloatArray, float]:
        """The PFO estimate of a tally and its ``V_PLDP`` (after PUE for the ``+`` variants)."""
        keys, support, reports = merge(self.report_eps, tally.support, tally.reports, self.d)
        if self.use_pue:
            support, reports = pue(keys, support, reports, rng)  # Alg. 2
        est = estimate(keys, support, reports, self.d)  # PFO.A, PFO.E (Eq. 1)
        return est, pldp_variance(keys, reports.tolist(), self.d)

    def on_tally(self, tally: Tally, rng: np.random.Generator) -> CollectionRequest | None:
        o = self._open
        if o is None or o.pending is None:
            raise ProtocolError("no request is pending")
        ask = o.pending
        if (tally.slot, tally.round) != (o.t, ask.round):
            raise ProtocolError(
                f"tally is for slot {tally.slot} {tally.round}, pending is slot {o.t} {ask.round}"
            )
        asked = self._asked(ask)
        if tally.support.shape != (len(self.groups), self.d) or (tally.reports > asked).any():
            raise ParameterError(
                f"tally must have support ({len(self.groups)}, {self.d}) and at most "
                f"{asked.tolist()} reports, got {tally.support.shape} and "
                f"{tally.reports.tolist()}"
            )
        o.pending = None
        if int(tally.reports.sum()) == 0:  # nobody answered
            if ask.round == "dissimilarity":
                return self._decide(o.t, -math.inf, rng)
            o.status = "skip"
            return None
        est, variance = self.pfo(tally, rng)
        if ask.round == "dissimilarity":  # Alg. 5 l.3-4 (Eq. 3, spec A24, A25)
            f_s = est if self.dis_on_raw else project_simplex(est)
            dis = float(np.mean((f_s - self.last_release) ** 2)) - variance / self.d
            return self._decide(o.t, dis, rng)
        o.histogram = project_simplex(est)  # Alg. 5 l.11 (spec §2.7)
        o.status = "publish"
        self._published(o.t, ask)
        return None

    # -- M_r helpers -------------------------------------------------------------------------

    def expected_reports(self, request: CollectionRequest) -> IntArray:
        """Users ``request`` asks, per level (from the population's level counts)."""
        cohort = request.cohort_buckets()
        if cohort is None:
            return self.population.level_totals()
        return self.population.users_in_levels(cohort)

    def publication_error(self, cohort: IntArray) -> float:
        """``err`` (Eq. 7) of a publication by ``cohort``: population mix (Alg. 5 l.7) or the
        cohort's own mix (Alg. 3 l.16, spec A26); no PUE inside ``err`` (spec §2.4)."""
        n_pp = self.population.users_in(cohort)
        if n_pp <= 0:
            return math.inf
        if self.candidate_err:
            counts = self.population.users_in_levels(cohort).tolist()
        else:
            totals = self.population.level_totals()
            counts = (n_pp * totals / max(int(totals.sum()), 1)).tolist()
        return report_error(self.report_eps, counts, self.users, self.d)

    def _publish_ask(self, cohort: IntArray) -> Ask:
        return Ask("publication", cohort, list(self.report_units))

    def describe_levels(self) -> str:
        """``W``, ``z`` and the shares, for :meth:`describe`."""
        shares = ", ".join(
            f"(w={g.w}, eps={g.eps:g}) x1/{s}"
            for g, s in zip(self.groups, self.shares, strict=True)
        )
        return f"W={self.window}, z={self.unit}, levels {shares}"
