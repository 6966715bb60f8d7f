"""The slot protocol every local (w-event LDP) mechanism shares.

In local mode the service never sees a true value. Devices perturb their own value with a
frequency oracle (:mod:`app.dp.oracles`) and the service only aggregates support counts. One
slot is at most two collection rounds:

1. ``open_slot(rng)`` starts slot ``t = self.t + 1`` and returns the first
   :class:`~app.dp.local.wire.CollectionRequest`: the *dissimilarity* round of the adaptive
   mechanisms (LBD, LBA, LPD, LPA), or directly the *publication* round of the others (LBU,
   PLBU, LSP, LPU). It returns None when nobody reports this slot (LSP between sampling slots).
2. The service sends the request; the devices in its cohort answer; the service sums their
   reports into a :class:`~app.dp.local.wire.Tally` (support counts per value and the number
   of reports).
3. ``on_tally(tally, rng)`` consumes the answer to the pending request. After a dissimilarity
   round it computes ``dis`` (LDP-IDS Eq. 4) and the potential publication error ``err``, and
   returns the publication request if ``dis > err``, else None. After a publication round it
   estimates the histogram and returns None.
4. ``close_slot()`` returns the slot's :class:`~app.dp.types.Release` (frequencies; the last
   release repeated when nothing was published) and records the slot on the ledger.

Ledgers. Before a request leaves the mechanism, the budget is taken: budget-division mechanisms
(everybody reports a share of ``eps``) ``ensure`` it on an exact
:class:`~app.dp.budget.WindowLedger`; population-division mechanisms (a cohort reports with the
whole ``eps``) mark the cohort's buckets on the :class:`~app.dp.local.population.Population`,
which refuses any bucket asked twice within ``w`` slots. A request names a cohort of buckets
(a bitmap, or None for every registered user), the oracle, and the budget per report both as a
float and in exact ledger units, so a device can check it against its own ledger
(:class:`~app.dp.budget.SlotLedger`).

The mechanism's state is plain values between any two calls, including mid-slot (a pending
request is part of it), so the service can checkpoint after sending a request. The wire types
live in :mod:`app.dp.local.wire`; noise-free runs for examples in :mod:`app.dp.local.simulate`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from app.dp import validate
from app.dp.budget import WindowLedger
from app.dp.errors import DPError, ParameterError
from app.dp.interfaces import PopulationWindow, RoundDriven
from app.dp.local.population import (
    MAX_BUCKETS,
    Population,
    bitmap,
    default_buckets,
)
from app.dp.local.wire import CollectionRequest, Round, Tally, mask_users
from app.dp.mechanism import Mechanism, constructor_params
from app.dp.oracles import FrequencyOracle, check_choice, make
from app.dp.types import FloatArray, Group, IntArray, Release, Status, WindowSpend


class ProtocolError(DPError):
    """A local mechanism's slot protocol was driven out of order.

    ``open_slot``, ``on_tally`` (once per request, with the tally of that request) and
    ``close_slot`` must alternate as the module :mod:`app.dp.local.base` documents. Nothing was
    spent by the refused call; fix the caller.
    """


@dataclass
class Ask:
    """A round a mechanism wants: its cohort (None: everybody) and units per report per group."""

    round: Round
    cohort: IntArray | None
    units: list[int]


@dataclass
class _Open:
    """What the current slot has done so far."""

    t: int
    pending: Ask | None = None
    dc: list[int] = field(default_factory=list)
    pub: list[int] = field(default_factory=list)
    users_dc: int = 0
    users_pub: int = 0
    status: Status | None = None
    histogram: FloatArray | None = None


class LocalMechanism(RoundDriven):
    """Base of the local mechanisms; see the module docstring for the protocol."""

    kind = "local"
    population_division: ClassVar[bool] = True
    publication_share: ClassVar[Fraction] = Fraction(1, 2)
    """Budget-division only: the part of ``eps`` a window may spend on publication."""

    def __init__(
        self,
        d: int,
        eps: float,
        w: int,
        users: int,
        buckets: int | None = None,
        oracle: str = "grr",
    ) -> None:
        self.d = validate.integer("d", d, 2)
        self.w = validate.integer("w", w)
        self.users = validate.integer("users", users)
        self.eps = validate.positive("eps", eps)
        self.buckets = check_buckets(buckets, self.users)
        self.oracle = check_choice(oracle)
        self._validate()
        self.groups: tuple[Group, ...] = (Group(self.w, self.eps),)
        self.group_users: list[int] = [self.users]
        self._reset()

    def _validate(self) -> None:
        """Subclass parameter rules beyond the common ones."""

    @property
    def n_buckets(self) -> int:
        """The number of buckets in use (``buckets``, or its default)."""
        return self.buckets if self.buckets is not None else default_buckets(self.users)

    def _reset(self) -> None:
        self.t = 0
        self.last_release: FloatArray = np.zeros(self.d)
        self.ledger = WindowLedger(self.groups, self.publication_share)
        self.population = Population(self.users, self.n_buckets, self.w)
        self._open: _Open | None = None

    @classmethod
    def for_stream(cls, d: int, groups: Sequence[Group], **params: Any) -> Mechanism:
        """A personalized mechanism (one taking ``groups``) takes the stream's levels as the
        users' levels; the others run at the strictest level ``(max w, min eps)``, which
        satisfies every offered level."""
        if "groups" in constructor_params(cls):
            return super().for_stream(d, groups, **params)
        return cls(d=d, eps=min(g.eps for g in groups), w=max(g.w for g in groups), **params)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {"d": 3, "eps": 1.0, "w": 4, "users": 48}

    def ledger_per_group(self) -> bool:
        """A personalized mechanism (one taking ``groups``) keeps a ledger per group."""
        return "groups" in constructor_params(type(self))

    def window_report(self) -> list[WindowSpend]:
        """Per group, the most one user spent in the window of ``w`` slots ending at the last
        slot (the figure ``eps`` bounds): the ledger's exact sum under budget division
        (everybody reports every slot), else the population ledger's
        (:meth:`_window_units`: what the users of the buckets asked in the window spent). A
        round already sent for the open slot counts: its budget was taken when it left."""
        out = []
        for g, budget in enumerate(self.ledger.budgets):
            group = budget.group
            if self.population_division:
                spent = budget.to_fraction(self._window_units(g))
            else:
                spent = self.ledger.spent(g)
            out.append(WindowSpend(group.w, group.eps, spent))
        return out

    def _window_units(self, g: int) -> int:
        """Population division: the most units a user of group ``g`` spent in the window of
        ``w`` slots ending at the population ledger's slot. A user reports at most once per
        window, with the whole ``eps`` (:attr:`full`), so this is ``full`` if any bucket
        reported in the window, else 0."""
        pop = self.population
        age = pop.age + max(0, self.t - pop.t)  # the slots since each bucket reported
        return self.full if bool(((age < pop.w) & (pop.sizes > 0)).any()) else 0

    # -- what the service asks ----------------------------------------------------------------

    def report_windows(self) -> tuple[IntArray, IntArray]:
        """Per group, ``(w_k, s_k)``: at most ``s_k`` reports in any ``w_k`` slots. A mechanism
        that is not personalized runs every user at the strictest level it was built for: one
        report in ``max(w)`` slots (:meth:`for_stream` builds it at the stream's ``max w``).

        >>> from app.dp.local import PLBU
        >>> from app.dp.types import Group
        >>> w, s = PLBU(d=3, groups=[Group(5, 1.0), Group(2, 0.5)], users=[4, 4]).report_windows()
        >>> w.tolist(), s.tolist()
        ([5, 5], [1, 1])
        """
        groups = len(self.group_users)
        return np.full(groups, self.w, dtype=np.int64), np.ones(groups, dtype=np.int64)

    def available_users(self) -> int | None:
        """Population division: users the population ledger lets report now; else None."""
        if not self.population_division:
            return None
        return self.population.available_users(self.population.t)

    def population_window(self) -> PopulationWindow | None:
        """Population division: the population ledger over its current window; else None."""
        if not self.population_division:
            return None
        pop = self.population
        return PopulationWindow(
            users=pop.users,
            buckets=pop.buckets,
            w=pop.w,
            t=pop.t,
            available=int(pop.sizes[pop.age >= pop.w].sum()),
            reported=[int(pop.sizes[pop.age == k].sum()) for k in range(min(pop.w, pop.t))],
        )

    # -- the slot protocol ------------------------------------------------------------------

    @property
    def pending(self) -> CollectionRequest | None:
        """The request awaiting its tally, if any (to re-send after a restart)."""
        o = self._open
        return None if o is None or o.pending is None else self._request(o.t, o.pending)

    def open_slot(self, rng: np.random.Generator) -> CollectionRequest | None:
        """Start slot ``t + 1``; return its first request, or None if nobody reports."""
        if self._open is not None:
            raise ProtocolError(f"slot {self._open.t} is still open: close it first")
        t = self.t + 1
        self._open = _Open(t, dc=[0] * len(self.groups), pub=[0] * len(self.groups))
        ask = self._dissimilarity_ask(t, rng)
        if ask is not None:
            return self._send(ask)
        return self._decide(t, None, rng)

    def on_tally(self, tally: Tally, rng: np.random.Generator) -> CollectionRequest | None:
        """Consume the answer to the pending request; return the next request or None."""
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
                f"tally must have support ({len(self.groups)}, {self.d}) and at most {asked} "
                f"reports, got {tally.support.shape} and {tally.reports.tolist()}"
            )
        o.pending = None
        oracles = [self._oracle(u, g) for g, u in enumerate(ask.units)]
        if ask.round == "dissimilarity":  # Alg. 1 l.5-6: c_{t,1} and dis (Eq. 4)
            n = int(tally.reports[0])
            est = oracles[0].estimate(tally.support[0], n)
            dis = float(np.mean((est - self.last_release) ** 2)) - oracles[0].mean_variance(n)
            return self._decide(o.t, dis if n > 0 else -math.inf, rng)
        total = int(tally.reports.sum())
        if total == 0:  # nobody answered: nothing to estimate, repeat the last release
            o.status = "skip"
            return None
        pairs = zip(oracles, tally.support, tally.reports, strict=True)
        weighted = [oracle.estimate(s, int(n)) * int(n) for oracle, s, n in pairs]
        o.histogram = np.sum(weighted, axis=0) / total  # PLBU: groups weighted by reports
        o.status = "publish"
        self._published(o.t, ask)
        return None

    def close_slot(self) -> Release:
        """Finish the slot: its release, after recording it on the ledger."""
        o = self._open
        if o is None or o.pending is not None or o.status is None:
            raise ProtocolError("the slot is not open or still waits for a tally")
        if not self.population_division:
            self.ledger.record(o.dc, o.pub)
        self._closed(o.t, o.users_pub)
        self.t = o.t
        if o.histogram is not None:
            self.last_release = o.histogram
        self._open = None
        return Release(
            slot=self.t,
            histogram=self.last_release,
            fresh=o.histogram is not None,
            status=o.status,
            spent_dc=self._eps(o.dc),
            spent_pub=self._eps(o.pub),
            mechanism=self.name,
            version=self.version,
            users_dc=o.users_dc,
            users_pub=o.users_pub,
        )

    # -- what subclasses decide ------------------------------------------------------------

    def _dissimilarity_ask(self, t: int, rng: np.random.Generator) -> Ask | None:
        """The dissimilarity round of slot ``t`` (None: the mechanism has none)."""
        return None

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        """The publication round of slot ``t``, or the status of a slot without one."""
        raise NotImplementedError

    def _published(self, t: int, ask: Ask) -> None:
        """Bookkeeping after a publication (LBA/LPA remember ``l`` and its units)."""

    def _closed(self, t: int, users_pub: int) -> None:
        """Bookkeeping at the end of every slot (LPD keeps publication cohort sizes)."""

    # -- helpers ---------------------------------------------------------------------------

    def _decide(
        self, t: int, dis: float | None, rng: np.random.Generator
    ) -> CollectionRequest | None:
        assert self._open is not None
        decision = self._publication_ask(t, dis, rng)
        if isinstance(decision, Ask):
            return self._send(decision)
        self._open.status = decision
        return None

    def _send(self, ask: Ask) -> CollectionRequest:
        """Take the budget (ledger or population), then hand out the request."""
        o = self._open
        assert o is not None
        is_dc = ask.round == "dissimilarity"
        dc = [a + u * is_dc for a, u in zip(o.dc, ask.units, strict=True)]
        pub = [a + u * (not is_dc) for a, u in zip(o.pub, ask.units, strict=True)]
        if self.population_division:
            cohort = np.arange(self.n_buckets) if ask.cohort is None else ask.cohort
            self.population.mark(o.t, cohort)
        else:
            self.ledger.ensure(dc, pub)
        o.dc, o.pub, o.pending = dc, pub, ask
        asked = int(self._asked(ask).sum())
        if ask.round == "dissimilarity":
            o.users_dc = asked
        else:
            o.users_pub = asked
        return self._request(o.t, ask)

    def _request(self, t: int, ask: Ask) -> CollectionRequest:
        oracles = [self._oracle(u, g) for g, u in enumerate(ask.units)]
        return CollectionRequest(
            mechanism=self.name,
            slot=t,
            round=ask.round,
            d=self.d,
            buckets=self.n_buckets,
            cohort=None if ask.cohort is None else bitmap(self.n_buckets, ask.cohort),
            oracle=tuple(o.name for o in oracles),
            eps=tuple(o.eps for o in oracles),
            units=tuple(ask.units),
            levels=self._level_vector(),
        )

    def _level_vector(self) -> bytes | None:
        """Every user's level for :attr:`CollectionRequest.levels` (None: not personalized)."""
        return None

    def expected_reports(self, request: CollectionRequest) -> IntArray:
        """Users ``request`` asks, per group, were every asked user to answer: for noise-free
        stand-ins of devices (:func:`app.dp.local.simulate.expected_tally`)."""
        return np.array([int(mask_users(request, self.users).sum())], dtype=np.int64)

    def _asked(self, ask: Ask) -> IntArray:
        """Users asked per group."""
        if ask.cohort is None:
            return np.array(self.group_users, dtype=np.int64)
        return np.array([self.population.users_in(ask.cohort)], dtype=np.int64)

    def _oracle(self, units: int, g: int = 0) -> FrequencyOracle:
        return make(self.oracle, self.d, self.ledger.budgets[g].to_eps(units))

    def _eps(self, units: list[int]) -> FloatArray:
        return np.array([b.to_eps(u) for b, u in zip(self.ledger.budgets, units, strict=True)])

    def _error(self, units: int, users: int) -> float:
        """``err = V(eps, n)`` of a publication of ``users`` reports at ``units`` (Eqs. 5-6)."""
        return self._oracle(units).mean_variance(users)

    @property
    def full(self) -> int:
        """The whole ``eps`` in ledger units: what one population-division report costs."""
        return self.ledger.budgets[0].total

    @property
    def unit_users(self) -> int:
        """``u = floor(N / (2w))``: LPD/LPA's dissimilarity cohort and LPA's publication unit."""
        return self.users // (2 * self.w)

    def _dc_cohort(self, t: int, rng: np.random.Generator) -> Ask:
        """Alg. 3 l.3: ``u`` available users, drawn uniformly (as whole buckets)."""
        return Ask("dissimilarity", self.population.draw(t, self.unit_users, rng), [self.full])

    # -- state -----------------------------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        o = self._open
        return {
            "t": self.t,
            "last_release": [float(x) for x in self.last_release],
            "ledger": self.ledger.state_dict(),
            "population": self.population.state_dict(),
            "open": None
            if o is None
            else {
                "t": o.t,
                "pending": None
                if o.pending is None
                else {
                    "round": o.pending.round,
                    "cohort": None if o.pending.cohort is None else o.pending.cohort.tolist(),
                    "units": list(o.pending.units),
                },
                "dc": list(o.dc),
                "pub": list(o.pub),
                "users_dc": o.users_dc,
                "users_pub": o.users_pub,
                "status": o.status,
                "histogram": None if o.histogram is None else [float(x) for x in o.histogram],
            },
        }

    def _load(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.last_release = np.array(state["last_release"], dtype=np.float64)
        self.ledger.load_state(state["ledger"])
        self.population.load_state(state["population"])
        o = state["open"]
        self._open = None
        if o is not None:
            p = o["pending"]
            self._open = _Open(
                t=int(o["t"]),
                pending=None
                if p is None
                else Ask(
                    p["round"],
                    None if p["cohort"] is None else np.array(p["cohort"], dtype=np.int64),
                    [int(u) for u in p["units"]],
                ),
                dc=[int(u) for u in o["dc"]],
                pub=[int(u) for u in o["pub"]],
                users_dc=int(o["users_dc"]),
                users_pub=int(o["users_pub"]),
                status=o["status"],
                histogram=None if o["histogram"] is None else np.array(o["histogram"]),
            )


def check_users(users: object, groups: int) -> list[int]:
    """``users`` as a list of one integer ``>= 1`` per group."""
    sizes = list(users) if isinstance(users, Sequence) else []
    if len(sizes) != groups:
        raise ParameterError(f"users must give one count per group, got {users!r}")
    return [validate.integer("users", n) for n in sizes]


def check_buckets(buckets: int | None, users: int) -> int | None:
    """``buckets`` if it is None (the default for ``users``) or an integer in
    ``[1, min(users, MAX_BUCKETS)]``."""
    if buckets is not None:
        validate.integer("buckets", buckets)
        if buckets > min(users, MAX_BUCKETS):
            raise ParameterError(
                f"buckets must be at most min(users, {MAX_BUCKETS}), got {buckets!r}"
            )
    return buckets
