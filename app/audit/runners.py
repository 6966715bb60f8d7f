"""Runners per mechanism kind: build the audit cases of a mechanism and run their trials.

An *adapter* knows one kind of mechanism (``central``, ``local``): which neighbouring pairs its
privacy model protects (:mod:`app.audit.pairs`), how to build the mechanism for a pair, and how
to run one trial and record what an observer sees (:class:`app.audit.features.Runs`). A kind
without an adapter (new kinds land before their adapter) gets an explicit "no adapter" verdict
from :mod:`app.audit.verdict`, never a crash: add an adapter to :data:`ADAPTERS`.

Trials are independent runs of the real mechanism class from a fresh instance; each trial is a
Python loop over a few slots (the mechanisms are stateful and decide per slot), while everything
per trial that is not the mechanism (other devices' reports, features, the event search) is
vectorized with numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.audit.features import STATUS_CODES, Runs, central_features, local_features, pattern_label
from app.audit.noise import noise_variants
from app.audit.pairs import (
    RELATIONS,
    SCENARIOS,
    CentralPair,
    LocalPair,
    ball_pages,
    boundary_level,
    central_pair,
    graph_cells,
    local_pair,
    period_pair,
)
from app.client.clock import When
from app.client.device import Device, Enrollment
from app.client.errors import ReportRefusedError
from app.dp.local.simulate import drive
from app.dp.local.wire import CollectionRequest, Tally, mask_users
from app.dp.oracles import make
from app.dp.types import Group

Progress = Callable[[int], None]
Features = tuple[list[str], np.ndarray, np.ndarray]


@dataclass
class Case:
    """One audit: a mechanism, a neighbouring pair, its claim, and how to sample it."""

    mechanism: str
    kind: str
    relation: str
    scenario: str
    group: int
    claim: Group
    sensitivity: int | None
    slots: int
    run: Callable[[str, int, np.random.Generator, Progress], Runs]
    features: Callable[[Runs], Features]
    label: Callable[[int], str]
    noise: str = ""
    """The noise kind the mechanism was built with ("" where it has none: local oracles)."""
    min_trials: int = 0
    """Runs per input this case needs at least, whatever the profile (its power analysis)."""
    statistic: str | None = None
    """The one feature the event is a threshold on (the log-likelihood ratio where the noise is
    known, :mod:`app.audit.tight`); None: every feature, the patterns and the fitted one."""


@dataclass(frozen=True)
class Settings:
    """What the adapters build: domain, groups per model, probes of the boundary search."""

    d: int = 2
    static_groups: tuple[Group, ...] = (Group(3, 1.0),)
    personalized_groups: tuple[Group, ...] = (Group(3, 1.0), Group(2, 0.5))
    central_cases: tuple[tuple[str, str], ...] = tuple((r, s) for r in RELATIONS for s in SCENARIOS)
    """(relation, scenario) pairs audited per group of a central mechanism."""
    boundary_probes: int = 24
    period_cases: tuple[tuple[str, str, bool], ...] = tuple(
        (r, p, True) for r in RELATIONS for p in ("straddle", "sampled")
    ) + tuple((r, "aligned", False) for r in RELATIONS)
    """(relation, placement, strict) per group of a period mechanism (:func:`period_pair`)."""
    graph_values: int = 2
    """``l``: values the target holds per slot on a (w,n) mechanism's pages (its sensitivity
    is ``l`` add/remove, ``2 l`` replace)."""
    papers_noise: bool = True
    """Also audit every noised mechanism with ``laplace``, the papers' variant, when the
    service's default noise is another kind."""
    trials: int = 2000
    """Runs per input of each pair when the caller does not say."""
    worst_case: bool = True
    """Also audit the worst-case cases (:mod:`app.audit.tight`: a pair realizing the
    mechanism's loss, claimed at that computed loss) of the mechanisms that have them."""


QUICK = Settings(
    central_cases=(("add/remove", "boundary"), ("replace", "jumps")),
    period_cases=(("add/remove", "straddle", True), ("replace", "sampled", True)),
    papers_noise=False,
    trials=200,
)
"""The CI profile (``dpstream audit --quick``, ``tests/audit``): one add/remove and one replace
case per group, the service's default noise only, 200 runs per input; the power controls run at
their own trial counts."""


# -- central ------------------------------------------------------------------------------------


def public_population(a: np.ndarray, b: np.ndarray) -> list[int]:
    """Users per group that both inputs ``(T, m, d)`` of a pair are run with: the most either
    holds at any slot. The auditor fixes it before any trial, the same for A and B, as a
    service configures it; OBS must never see a side's own row sums (issue 16)."""
    most = np.maximum(a.sum(axis=2).max(axis=0), b.sum(axis=2).max(axis=0))
    return [int(n) for n in most]


def run_central(
    build: Callable[[], Any],
    counts: np.ndarray,
    population: list[int],
    trials: int,
    rng: np.random.Generator,
    progress: Progress,
) -> Runs:
    """``trials`` runs of fresh mechanisms over ``counts`` ``(T, m, d)``."""
    slots, _, d = counts.shape
    hist = np.empty((trials, slots, d))
    status = np.empty((trials, slots), dtype=np.int64)
    for i in range(trials):
        m = build()
        for s in range(slots):
            r = m.step(counts[s], rng, population)
            hist[i, s] = r.histogram
            status[i, s] = STATUS_CODES[r.status]
        progress(1)
    return Runs(hist, status)


class CentralAdapter:
    """Central w-event mechanisms (``step(counts, rng)``), per requirement group."""

    def cases(
        self, name: str, cls: Any, settings: Settings, rng: np.random.Generator
    ) -> list[Case]:
        personalized = bool(getattr(cls, "personalized", True))
        groups = settings.personalized_groups if personalized else settings.static_groups
        out = []
        for noise in noise_variants(name, cls, settings.papers_noise):
            for g in range(len(groups)):
                level = 0
                if any(scenario == "boundary" for _, scenario in settings.central_cases):
                    level = boundary_level(
                        self.prober(cls, groups, g, settings.d, rng, noise),
                        settings.boundary_probes,
                    )
                for relation, scenario in settings.central_cases:
                    pair = self.pair(relation, scenario, g, groups, settings, level)
                    if pair is not None:
                        out.append(self.case(name, cls, groups, pair, noise=noise))
        return out

    def pair(
        self,
        relation: str,
        scenario: str,
        group: int,
        groups: tuple[Group, ...],
        settings: Settings,
        level: int,
    ) -> CentralPair | None:
        """The neighbouring pair of one case (None: the relation does not apply)."""
        return central_pair(relation, scenario, group, groups, settings.d, level)  # type: ignore[arg-type]

    kind = "central"

    def case(
        self,
        name: str,
        cls: Any,
        groups: Sequence[Group],
        pair: CentralPair,
        prefix_seed: int = 0,
        noise: str | None = None,
        **params: Any,
    ) -> Case:
        """The audit case of one pair (also used by the power controls), with ``noise`` (None:
        the class's own default) and extra constructor ``params``.

        The pair's prefix is played once (generator seeded with ``prefix_seed``); every trial
        starts from the state it left.
        """
        d = pair.a.shape[2]
        kw = {**params, "sensitivity": pair.sensitivity}
        if noise is not None:
            kw["noise"] = noise
        start = cls.for_stream(d, list(groups), **kw)
        pad = self._pad(start, pair.a.shape[0])
        a = np.concatenate([pair.a, np.repeat(pair.a[-1:], pad, axis=0)])
        b = np.concatenate([pair.b, np.repeat(pair.b[-1:], pad, axis=0)])
        population = public_population(a, b)
        prefix_rng = np.random.default_rng(prefix_seed)
        for s in range(pair.prefix):
            start.step(a[s], prefix_rng, population)
        blob = start.state_dict()

        def build() -> Any:
            m = cls.for_stream(d, list(groups), **kw)
            m.load_state(blob)
            return m

        def run(side: str, trials: int, rng: np.random.Generator, progress: Progress) -> Runs:
            counts = (a if side == "A" else b)[pair.prefix :]
            return self._run(build, counts, population, pair.prefix, trials, rng, progress)

        slots = a.shape[0] - pair.prefix
        mid = np.asarray((a + b).sum(axis=1) / 2.0)[pair.prefix :]
        delta = np.asarray((a - b).sum(axis=1), dtype=np.float64)[pair.prefix :]
        return Case(
            name,
            self.kind,
            pair.relation,
            pair.scenario,
            pair.group,
            pair.claim,
            pair.sensitivity,
            slots,
            run,
            lambda runs: central_features(runs, mid, delta),
            lambda code: pattern_label(code, slots),
            str(start.noise),
        )

    def _pad(self, mechanism: Any, slots: int) -> int:
        """Equal slots to append so that every audited slot is released (none here)."""
        return 0

    def _run(
        self,
        build: Callable[[], Any],
        counts: np.ndarray,
        population: list[int],
        prefix: int,
        trials: int,
        rng: np.random.Generator,
        progress: Progress,
    ) -> Runs:
        return run_central(build, counts, population, trials, rng, progress)

    @staticmethod
    def prober(
        cls: Any,
        groups: Sequence[Group],
        g: int,
        d: int,
        rng: np.random.Generator,
        noise: str | None = None,
    ) -> Callable[[int, int], float]:
        kw = {} if noise is None else {"noise": noise}

        def publishes(level: int, probes: int) -> float:
            counts = np.zeros((len(groups), d), dtype=np.int64)
            counts[g, 0] = level
            users = [int(n) for n in counts.sum(axis=1)]  # the probe's fixed scenario, no pair
            fresh = [
                cls.for_stream(d, list(groups), **kw).step(counts, rng, users).fresh
                for _ in range(probes)
            ]
            return float(np.mean(fresh))

        return publishes


# -- graph --------------------------------------------------------------------------------------


class Configured:
    """A mechanism class with fixed extra constructor parameters (a graph, ``n``, ...)."""

    def __init__(self, cls: Any, extra: dict[str, Any]) -> None:
        self.cls, self.extra = cls, extra

    def for_stream(self, d: int, groups: Sequence[Group], **params: Any) -> Any:
        return self.cls.for_stream(d, groups, **{**self.extra, **params})


class GraphAdapter(CentralAdapter):
    """(w,n) mechanisms over a public graph: central pairs under the (w,n) relation.

    The graph, ``n`` and the other extra parameters come from the class's ``test_params``; the
    requirement is the static group. The (w,n) relation (the papers', ``app.dp.wn.ledger``)
    protects a user's up to ``l`` values per slot on pages of one spatial window ``W_n(c)``
    (within ``n - 1`` hops of a centre ``c``) for ``w`` slots. The auditor takes the centre
    whose window holds the most pages and puts the target's ``l = Settings.graph_values``
    values on the nearest ``l`` of them (``add/remove``, sensitivity ``l``); ``replace`` moves
    them to the farthest ``l`` pages of the same window (sensitivity ``2 l``). A window of one
    page (``n = 1``, RescueDP) holds one value and no replace.
    """

    kind = "graph"

    def cases(
        self, name: str, cls: Any, settings: Settings, rng: np.random.Generator
    ) -> list[Case]:
        params = dict(cls.test_params())
        d = int(params.pop("d"))
        params.pop("groups", None)
        configured = Configured(cls, params)
        probe = configured.for_stream(d, list(settings.static_groups))
        balls = [ball_pages(probe.graph.hop_distances(c), int(probe.n)) for c in range(d)]
        self.window = max(balls, key=len)  # the first centre with the largest window
        self.values = settings.graph_values
        groups = settings.static_groups
        out = []
        for noise in noise_variants(name, cls, settings.papers_noise):
            level = 0
            if any(scenario == "boundary" for _, scenario in settings.central_cases):
                level = boundary_level(
                    self.prober(configured, groups, 0, d, rng, noise), settings.boundary_probes
                )
            for relation, scenario in settings.central_cases:
                pair = self.pair(relation, scenario, 0, groups, settings, level, d)
                if pair is not None:
                    out.append(self.case(name, configured, groups, pair, noise=noise))
        return out

    def pair(
        self,
        relation: str,
        scenario: str,
        group: int,
        groups: tuple[Group, ...],
        settings: Settings,
        level: int,
        d: int | None = None,
    ) -> CentralPair | None:
        cells = graph_cells(self.window, self.values, relation)  # type: ignore[arg-type]
        if cells is None:
            return None
        return central_pair(
            relation,  # type: ignore[arg-type]
            scenario,
            group,
            groups,
            d or settings.d,
            level,
            cells_a=cells[0],
            cells_b=cells[1],
        )


# -- period -------------------------------------------------------------------------------------


def run_period(
    build: Callable[[], Any],
    counts: np.ndarray,
    population: list[int],
    trials: int,
    rng: np.random.Generator,
    progress: Progress,
) -> Runs:
    """Like :func:`run_central` for mechanisms whose ``step`` returns the releases that became
    known at that slot (a period's releases at its end). Every trial runs from slot 1 of a
    fresh mechanism; ``counts`` must end on a period boundary so every slot is released."""
    slots, _, d = counts.shape
    hist = np.full((trials, slots, d), np.nan)
    status = np.full((trials, slots), STATUS_CODES["skip"], dtype=np.int64)
    for i in range(trials):
        m = build()
        for s in range(slots):
            for r in m.step(counts[s], rng, population):
                hist[i, r.slot - 1] = r.histogram
                status[i, r.slot - 1] = STATUS_CODES[r.status]
        progress(1)
    if np.isnan(hist).any():
        raise RuntimeError("a period mechanism left audited slots unreleased")
    return Runs(hist, status)


class PeriodAdapter:
    """Period mechanisms (``step`` returns the releases known at a slot, a period at its end).

    Pairs come from :func:`~app.audit.pairs.period_pair`, placed where a period's loss
    concentrates: a window straddling two periods (all its slots changed, or only the two
    always-sampled slots at the boundary) in strict mode, and a window inside one period in
    non-strict mode (``strict=False``, the papers' setting, proved for aligned periods only).
    Every trial runs the whole periods the window touches and observes every released slot:
    a period's noise is shared by its slots (Fourier coefficients, reconstruction, features),
    so slots the user did not change carry information too. The noise is the one the service
    builds the mechanism with (:func:`~app.audit.noise.noise_variants`).
    """

    kind = "period"

    def cases(
        self, name: str, cls: Any, settings: Settings, rng: np.random.Generator
    ) -> list[Case]:
        params = dict(cls.test_params())
        params.pop("d", None)
        params.pop("groups", None)
        groups = settings.personalized_groups
        out = []
        for noise in noise_variants(name, cls, settings.papers_noise):
            seen = set()
            for relation, placement, strict in settings.period_cases:
                probe = cls.for_stream(
                    settings.d, list(groups), noise=noise, strict=strict, **params
                )
                if probe.period == 1:  # periods of one slot: nothing straddles
                    placement, strict = "aligned", True
                if (relation, placement, strict) in seen:
                    continue
                seen.add((relation, placement, strict))
                for g in range(len(groups)):
                    pair = period_pair(
                        relation,  # type: ignore[arg-type]
                        placement,
                        g,
                        groups,
                        settings.d,
                        int(probe.period),
                    )
                    out.append(self.case(name, cls, groups, pair, noise, strict=strict, **params))
        return out

    def case(
        self,
        name: str,
        cls: Any,
        groups: Sequence[Group],
        pair: CentralPair,
        noise: str | None = None,
        **params: Any,
    ) -> Case:
        """The audit case of one period pair (also used by the power controls)."""
        d = pair.a.shape[2]
        kw = {**params, "sensitivity": pair.sensitivity}
        if noise is not None:
            kw["noise"] = noise
        probe = cls.for_stream(d, list(groups), **kw)
        population = public_population(pair.a, pair.b)

        def build() -> Any:
            return cls.for_stream(d, list(groups), **kw)

        def run(side: str, trials: int, rng: np.random.Generator, progress: Progress) -> Runs:
            counts = pair.a if side == "A" else pair.b
            return run_period(build, counts, population, trials, rng, progress)

        slots = pair.a.shape[0]
        mid, delta = pair.mid, pair.delta
        scenario = pair.scenario + ("" if getattr(probe, "strict", True) else ", non-strict")
        return Case(
            name,
            self.kind,
            pair.relation,
            scenario,
            pair.group,
            pair.claim,
            pair.sensitivity,
            slots,
            run,
            lambda runs: central_features(runs, mid, delta),
            lambda code: pattern_label(code, slots),
            str(probe.noise),
        )


# -- local --------------------------------------------------------------------------------------


def run_local(
    build: Callable[[], Any],
    pair: LocalPair,
    side: str,
    trials: int,
    rng: np.random.Generator,
    progress: Progress,
    device: Callable[[Enrollment], Device] = Device,
) -> Runs:
    """``trials`` runs of the slot protocol with the target answering through the device SDK.

    Every other asked device perturbs its fixed value with the request's oracle (vectorized);
    the target device (``device``, the SDK's :class:`~app.client.device.Device` unless a control
    swaps it, enrolled with the pair's claim) answers with ``respond``, which checks its own
    ledger (and its clock, on the one trusted clock of an offline run: :meth:`When.offline`);
    its payload is aggregated like any report.
    """
    value = pair.values(side)
    hist = np.empty((trials, pair.slots, 0))
    status = np.empty((trials, pair.slots), dtype=np.int64)
    reports = np.zeros((trials, pair.slots, 2))
    reported = np.zeros((trials, pair.slots, 2), dtype=bool)
    for i in range(trials):
        m = build()
        if hist.shape[2] == 0:
            hist = np.empty((trials, pair.slots, m.d))
        group_of = m.user_groups()
        target = device(
            Enrollment(
                pair.target, pair.claim.w, pair.claim.eps, pair.group, slot_s=1.0, origin_s=0.0
            )
        )  # When.offline's grid
        for s in range(pair.slots):

            def answer(
                request: CollectionRequest,
                i: int = i,
                s: int = s,
                m: Any = m,
                group_of: np.ndarray = group_of,
                target: Device = target,
            ) -> Tally:
                asked = mask_users(request, m.users)
                asked[pair.target] = False
                support = np.zeros((len(request.oracle), m.d), dtype=np.int64)
                counts = np.zeros(len(request.oracle), dtype=np.int64)
                for g in range(len(request.oracle)):
                    idx = np.flatnonzero(asked & (group_of == g))
                    oracle = make(request.oracle[g], m.d, request.eps[g])
                    support[g] = oracle.support(oracle.perturb(pair.others[idx], rng))
                    counts[g] = idx.shape[0]
                try:
                    report = target.respond(request, value, rng, When.offline(request.slot))
                except ReportRefusedError:
                    report = None
                if report is not None:
                    oracle = make(report.oracle, m.d, request.eps[pair.group])
                    own = oracle.support(oracle.from_payloads([report.payload]))
                    support[pair.group] += own
                    counts[pair.group] += 1
                    r = 0 if request.round == "dissimilarity" else 1
                    reports[i, s, r] = own[pair.a] - own[pair.b]
                    reported[i, s, r] = True
                return Tally(request.slot, request.round, support, counts)

            release = drive(m, answer, rng)  # the one local loop (app.dp.local.simulate)
            hist[i, s] = release.histogram
            status[i, s] = STATUS_CODES[release.status]
        progress(1)
    return Runs(hist, status, reports, reported)


def local_label(code: int, slots: int) -> str:
    """Status letters, upper case where the target device reported."""
    letters = []
    for _ in range(slots):
        code, digit = divmod(code, 6)
        letter = "spn"[digit % 3]
        letters.append(letter.upper() if digit >= 3 else letter)
    return "".join(letters)


class LocalAdapter:
    """Local w-event mechanisms (two-round slot protocol), per requirement group."""

    def cases(
        self, name: str, cls: Any, settings: Settings, rng: np.random.Generator
    ) -> list[Case]:
        params = cls.test_params()
        probe = cls(**params)
        return [
            self.case(name, lambda: cls(**params), local_pair(probe, g))
            for g in range(len(probe.groups))
        ]

    def case(
        self,
        name: str,
        build: Callable[[], Any],
        pair: LocalPair,
        device: Callable[[Enrollment], Device] = Device,
    ) -> Case:
        def run(side: str, trials: int, rng: np.random.Generator, progress: Progress) -> Runs:
            return run_local(build, pair, side, trials, rng, progress, device)

        return Case(
            name,
            "local",
            pair.relation,
            pair.scenario,
            pair.group,
            pair.claim,
            None,
            pair.slots,
            run,
            lambda runs: local_features(runs, pair.a, pair.b),
            lambda code: local_label(code, pair.slots),
        )


ADAPTERS: dict[str, Any] = {
    "central": CentralAdapter(),
    "local": LocalAdapter(),
    "period": PeriodAdapter(),
    "graph": GraphAdapter(),
}
"""Mechanism kind -> adapter. A registered kind missing here gets a "no adapter" verdict."""
