"""Power controls: deliberately broken mechanisms the auditor must catch. Never registered.

Each control is a real mechanism class with one bug, the kind a ledger does not see, audited with
the same runners, events and bounds as the registered mechanisms. A control that is not caught
(lower bound at or below its claimed ``eps``) fails the audit: the auditor has lost its power.

=======================  ==========================================================  =============
control                  the bug                                                     true loss
=======================  ==========================================================  =============
``uniform-per-slot``     Uniform draws noise at ``eps`` per slot, records ``eps/w``  ``w eps``
``uniform-naive-float``  Laplace from the textbook float sampler (Mironov 2012)      unbounded
``uniform-half-scale``   Uniform's noise scale halved                                ``2 eps``
``uniform-replace-s1``   replace pairs against ``sensitivity=1`` (the 2-eps gap)     ``2 eps``
``ba-no-nullify``        BA that never updates ``l`` (the authors' code, spec A28)   ``(w+1) eps/2``
``ba-noiseless-dc``      BA deciding on the un-noised dissimilarity                  unbounded
``lpu-twice``            LPU asking every device every slot with the full ``eps``    ``w eps``
``uniform-1.5x-replace`` Uniform noised at ``1.5 eps``, audited on replace pairs     ``1.5 eps``
``local-1.5eps``         a device perturbing its report at ``1.5 eps``               ``1.5 eps``
``period-2x``            OptStream releasing every period at ``2 eps_P``             ``2 eps``
``draws-2x``             every discrete Laplace draw at twice its budget (Sample)    ``2 claim``
``draws-2x-period``      the same plant on OptStream                                 ``2 claim``
``grid-halved``          the grid's sensitivity in steps halved (OptStream, sums)    ``2 claim``
``optstream-delta``      OptStream's PERTURB at ``Delta``, not ``k Delta`` (k = 2)   ``2 claim``
``uniform-2x``           central: Uniform noised at twice its budget                 ``2 claim``
``optstream-2x``         period: strict OptStream releasing at ``2 eps_P``           ``2 claim``
``wn-uniform-2x``        graph: (w,n) Uniform noised at twice its budget             ``2 claim``
``lpu-2x``               local: the device perturbing its report at ``2 eps``        ``2 claim``
=======================  ==========================================================  =============

``uniform-1.5x-replace``, ``local-1.5eps`` and ``period-2x`` run with the noise the service
builds their mechanism with (:func:`app.audit.noise.service_noise`): they are the issue-22
checks that the auditor catches a modest overspend on the path the service runs.

The last eight (issue 33) run on the worst-case case of a registered mechanism
(:mod:`app.audit.tight`), whose claim is the pair's loss computed from the *registered* class,
so a plant never moves its own claim; the real mechanism passes that very case in the same run.
The first three are the defects the issue planted in a scratch copy: they patch a module of the
real code (:func:`draws_doubled`, :func:`grid_halved`, :func:`perturb_at_delta`) for the
duration of the case's runs only (:func:`planted`), so no mechanism's source changes; the other
five are subclasses or a device with one bug, one per kind.

The configurations (``w``, ``eps``, trials) were chosen by a power analysis of the auditor on
the ideal Laplace composition (``docs/audit.md``), so that each is caught with probability
about 0.95 or more at its trial count. ``lpu-twice``'s target runs on :class:`CarelessDevice`, a
client that does not enforce its window: with the SDK's :class:`~app.client.device.Device` the
second request is refused and nothing leaks (``tests/audit`` shows both).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from app.audit.features import Runs
from app.audit.noise import service_noise
from app.audit.pairs import boundary_level, central_pair, local_pair, period_pair
from app.audit.runners import Case, CentralAdapter, LocalAdapter, PeriodAdapter, Progress, Settings
from app.audit.tight import (
    GRID_TRIALS,
    TIGHT_TRIALS,
    central_case,
    graph_case,
    local_case,
    period_case,
)
from app.client.device import Device, Enrollment
from app.dp import noise as dp_noise
from app.dp.budget import SlotLedger, WindowLedger
from app.dp.central.ba import BA
from app.dp.central.base import Outcome
from app.dp.central.sample import Sample
from app.dp.central.uniform import Uniform
from app.dp.local.base import Ask
from app.dp.local.lpu import LPU
from app.dp.local.population import Population
from app.dp.noise import perturb
from app.dp.period import optstream as optstream_module
from app.dp.period.optstream import OptStream
from app.dp.types import FloatArray, Group, IntArray, Status
from app.dp.wn.uniform import WNUniform

BOUNDARY_PROBES = Settings().boundary_probes


class UniformPerSlot(Uniform):
    """Records ``eps/w`` per slot on the ledger but draws the noise at the whole ``eps``."""

    name = "uniform-per-slot"

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        pub = [2 * b.share for b in self.ledger.budgets]
        self.ledger.ensure([0], pub)
        eps = float(self._calibrated([self.ledger.budgets[0].total])[0])  # the bug: eps, not eps/w
        return Outcome(
            perturb(self.noise, rng, counts[0].astype(np.float64), eps), "publish", [0], pub
        )


def naive_laplace(rng: np.random.Generator, scale: float, size: int) -> np.ndarray:
    """The textbook inverse-CDF Laplace sampler in floating point (Mironov, CCS 2012)."""
    u = rng.random(size) - 0.5
    return np.asarray(-scale * np.sign(u) * np.log(1.0 - 2.0 * np.abs(u)))


def naive_reachable(x: np.ndarray, count: float, scale: float) -> np.ndarray:
    """Whether each float ``x`` is exactly ``count + naive_laplace(...)`` for some draw.

    Inverts the sampler (``|U| = (1 - exp(-|y|/scale)) / 2``, ``sign(U) = sign(y)``) onto the
    generator's ``2**-53`` grid and re-runs it on the nearest grid points: an output no draw can
    produce from ``count`` proves the input was not ``count``.
    """
    y = x - count
    u = np.where(y >= 0, 1.0, -1.0) * -np.expm1(-np.abs(y) / scale) / 2.0
    k = np.rint((u + 0.5) * 2.0**53)
    hit = np.zeros(np.shape(x), dtype=bool)
    for step in range(-3, 4):
        uk = (k + step) * 2.0**-53 - 0.5
        hit |= count + (-scale * np.sign(uk) * np.log(1.0 - 2.0 * np.abs(uk))) == x
    return hit


class UniformNaiveFloat(Uniform):
    """Uniform whose Laplace noise comes from the naive floating-point sampler."""

    name = "uniform-naive-float"

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        pub = [2 * b.share for b in self.ledger.budgets]
        self.ledger.ensure([0], pub)
        scale = 1.0 / float(self._calibrated(pub)[0])
        noisy = counts[0].astype(np.float64) + naive_laplace(rng, scale, self.d)  # the bug
        return Outcome(noisy, "publish", [0], pub)


class UniformHalfScale(Uniform):
    """Uniform whose Laplace scale is half what ``eps/w`` requires."""

    name = "uniform-half-scale"

    def _calibrated(self, units: list[int]) -> list[Fraction]:
        return [2 * f for f in super()._calibrated(units)]  # the bug: twice the budget


class _UncheckedLedger(WindowLedger):
    """A ledger that records but never refuses: code without the ledger's defence."""

    def ensure(self, dc: Sequence[int], pub: Sequence[int]) -> None:
        return None


class BANoNullify(BA):
    """BA as the authors' code runs it: ``l`` and its shares are never updated (spec A28)."""

    name = "ba-no-nullify"

    def _reset(self) -> None:
        super()._reset()
        self.ledger = _UncheckedLedger(self.budget_groups, self.publication_share)

    def _published(self, t: int, offer: list[int]) -> None:
        return None  # the bug: Alg. 5 l.17 is missing


class BANoiselessDC(BA):
    """BA that draws the dissimilarity noise but decides on the exact dissimilarity."""

    name = "ba-noiseless-dc"

    def _slot(
        self, t: int, counts: IntArray, population: list[int], rng: np.random.Generator
    ) -> Outcome:
        self._exact = float(np.abs(counts.sum(axis=0) - self.last_release).sum()) / self.d
        return super()._slot(t, counts, population, rng)

    def _publishes(self, dis: float, threshold: float) -> bool:
        return self._exact > threshold  # the bug: the un-noised dis*


class _OpenLedger(SlotLedger):
    """A device ledger that records but lets every request fit."""

    def fits(self, slot: int, units: int) -> bool:
        return True


class CarelessDevice(Device):
    """A client that does not enforce its window (the SDK's :class:`Device` does)."""

    def __init__(self, enrollment: Enrollment) -> None:
        super().__init__(enrollment)
        self.ledger = _OpenLedger(self.ledger.budget.group)


class _ForgetfulPopulation(Population):
    """A population ledger that never records who reported."""

    def mark(self, t: int, cohort: Any) -> None:
        return None


class LPUTwice(LPU):
    """LPU that asks every device at every slot with the whole ``eps``."""

    name = "lpu-twice"

    def _reset(self) -> None:
        super()._reset()
        self.population = _ForgetfulPopulation(self.users, self.n_buckets, self.w)

    def _publication_ask(self, t: int, dis: float | None, rng: np.random.Generator) -> Ask | Status:
        return Ask("publication", None, [self.full])  # the bug: everybody, every slot


class UniformUnderNoised(Uniform):
    """Uniform whose noise is drawn at 1.5 times the budget the ledger records."""

    name = "uniform-1.5x-replace"

    def _calibrated(self, units: list[int]) -> list[Fraction]:
        return [Fraction(3, 2) * f for f in super()._calibrated(units)]  # the bug: 1.5x


class SharpDevice(Device):
    """A client that records the requested ``eps`` but perturbs its report at ``1.5 eps``."""

    def _report(self, request: Any, value: int, rng: np.random.Generator, eps: float) -> Any:
        return super()._report(request, value, rng, 1.5 * eps)  # the bug


class OptStreamDoubled(OptStream):
    """OptStream releasing every period at twice the budget its ledger records."""

    name = "period-2x"

    @property
    def period_eps(self) -> float:
        return 2.0 * super().period_eps  # the bug: every share doubled


class DoubledDevice(Device):
    """A client that records the requested ``eps`` but perturbs its report at ``2 eps``."""

    def _report(self, request: Any, value: int, rng: np.random.Generator, eps: float) -> Any:
        return super()._report(request, value, rng, 2.0 * eps)  # the bug


class WNUniformDoubled(WNUniform):
    """(w,n) Uniform drawing every page's noise at twice the budget its ledger records."""

    name = "wn-uniform-2x"

    def calibrated(self, units: Any) -> FloatArray:
        return 2.0 * super().calibrated(units)  # the bug


# -- plants: a module of the real code patched for the duration of a case's runs -------------


@contextlib.contextmanager
def _patched(module: Any, name: str, replacement: Any) -> Iterator[None]:
    original = getattr(module, name)  # an AttributeError here: the plant lost its target
    setattr(module, name, replacement)
    try:
        yield
    finally:
        setattr(module, name, original)


@contextlib.contextmanager
def draws_doubled() -> Iterator[None]:
    """Every discrete Laplace draw of :mod:`app.dp.noise` at twice the budget it is asked for.

    Both public samplers are wrapped (whichever calls the other), and only the outermost call
    doubles, so a draw is doubled once whatever the samplers' internal structure."""
    depth = [0]

    def doubled(original: Callable[..., Any]) -> Callable[..., Any]:
        def draw(rng: np.random.Generator, eps: float, *args: Any, **kw: Any) -> Any:
            depth[0] += 1
            try:
                return original(rng, eps if depth[0] > 1 else 2 * eps, *args, **kw)
            finally:
                depth[0] -= 1

        return draw

    names = ("two_sided_geometric", "discrete_laplace")
    with contextlib.ExitStack() as stack:
        for name in names:
            stack.enter_context(_patched(dp_noise, name, doubled(getattr(dp_noise, name))))
        yield


@contextlib.contextmanager
def grid_halved() -> Iterator[None]:
    """:func:`app.dp.noise.grid_units` halved: every grid-noised quantity 2x under-noised."""
    original = dp_noise.grid_units

    def halved(sensitivity: float, values: int, step: float) -> int:
        return math.ceil(original(sensitivity, values, step) / 2)  # the bug

    with _patched(dp_noise, "grid_units", halved):
        yield


@contextlib.contextmanager
def perturb_at_delta() -> Iterator[None]:
    """OptStream's PERTURB calibrated to ``Delta`` instead of ``k Delta`` (Thm 8 forgotten)."""

    def perturb_delta(
        x: FloatArray,
        samples: IntArray,
        eps: float,
        delta: float,
        rng: np.random.Generator,
        *,
        noise: Any,
        exact: bool = False,
    ) -> FloatArray:
        return dp_noise.add_noise(noise, rng, x[samples], eps, delta, exact=exact)  # the bug

    with _patched(optstream_module, "perturb", perturb_delta):
        yield


def planted(case: Case, plant: Callable[[], contextlib.AbstractContextManager[None]]) -> Case:
    """``case`` whose runs (not its claim, computed before) happen with ``plant`` active."""
    inner = case.run

    def run(side: str, trials: int, rng: np.random.Generator, progress: Progress) -> Any:
        with plant():
            return inner(side, trials, rng, progress)

    return dataclasses.replace(case, run=run)


@dataclass(frozen=True)
class Control:
    """A broken mechanism, the case that must catch it, and the trials per side it needs."""

    name: str
    bug: str
    trials: int
    build: Callable[[], Case]


def _named(case: Case, name: str) -> Case:
    return dataclasses.replace(case, mechanism=name)


def _central(name: str, cls: Any, group: Group, relation: str, scenario: str, **kw: Any) -> Case:
    adapter = CentralAdapter()
    if scenario == "boundary":
        prober = adapter.prober(cls, (group,), 0, 2, np.random.default_rng(0))
        kw["level"] = boundary_level(prober, BOUNDARY_PROBES)
    pair = central_pair(relation, scenario, 0, (group,), 2, **kw)  # type: ignore[arg-type]
    return adapter.case(name, cls, (group,), pair)


def _under_noised() -> Case:
    """Replace pairs at ``w = 1, eps = 2`` with the service's noise: the true loss is 3 (at
    ``eps = 1`` the 0.5 gap leaves a 1500-run audit a coin toss, as for the 2-eps controls)."""
    group = Group(1, 2.0)
    pair = central_pair("replace", "jumps", 0, (group,), 2)
    noise = service_noise("uniform", Uniform)
    return CentralAdapter().case(
        "uniform-1.5x-replace", UniformUnderNoised, (group,), pair, noise=noise
    )


def _sharp_device() -> Case:
    def build() -> LPU:
        return LPU(d=2, eps=1.0, w=1, users=16)

    return LocalAdapter().case("local-1.5eps", build, local_pair(build(), 0), SharpDevice)


def _period_doubled() -> Case:
    """OptStream without sampling or features (``k = W``, every slot perturbed), the papers'
    non-strict budget ``eps_P = eps``, doubled: a window inside one period loses ``2 eps``."""
    group = Group(2, 1.0)
    pair = period_pair("add/remove", "aligned", 0, (group,), 2, 2)
    params = {"k": 2, "sampling": "none", "postprocess": False, "strict": False}
    case = PeriodAdapter().case(
        "period-2x",
        OptStreamDoubled,
        (group,),
        pair,
        service_noise("optstream", OptStream),
        **params,
    )
    # every slot perturbed with known discrete noise: judge the likelihood-ratio statistic only
    # (a fitted feature chosen on the search half can miss the 2x with this noise, seen at the
    # default seed once the sampler became exact)
    return dataclasses.replace(case, statistic="loss_stat")


def _naive_float() -> Case:
    """The float-reachability event needs the sampler's scale and both inputs' counts, so this
    control adds two features to the usual ones: released cells reachable from A, from B."""
    group = Group(1, 0.5)
    case = _central("uniform-naive-float", UniformNaiveFloat, group, "add/remove", "boundary")
    pair = central_pair("add/remove", "boundary", 0, (group,), 2)
    scale = group.w / group.eps
    cells = np.flatnonzero(pair.delta[0])
    base = case.features

    def features(runs: Runs) -> tuple[list[str], np.ndarray, np.ndarray]:
        names, x, codes = base(runs)
        extra = []
        for source in (pair.a, pair.b):
            count = source[0].sum(axis=0)
            extra.append(
                np.all(
                    [naive_reachable(runs.hist[:, 0, j], float(count[j]), scale) for j in cells],
                    axis=0,
                ).astype(np.float64)
            )
        return (
            [*names, "float_reachable_from_A", "float_reachable_from_B"],
            np.column_stack([x, *extra]),
            codes,
        )

    return dataclasses.replace(case, features=features)


def _local_twice() -> Case:
    def build() -> LPUTwice:
        return LPUTwice(d=2, eps=1.0, w=4, users=16)

    return LocalAdapter().case("lpu-twice", build, local_pair(build(), 0), CarelessDevice)


CONTROLS: tuple[Control, ...] = (
    Control(
        "uniform-per-slot",
        "noise at eps per slot instead of eps/w",
        300,
        lambda: _central(
            "uniform-per-slot", UniformPerSlot, Group(10, 1.0), "add/remove", "boundary"
        ),
    ),
    Control(
        "uniform-naive-float",
        "Laplace from the naive float sampler (Mironov 2012)",
        300,
        _naive_float,
    ),
    Control(
        "uniform-half-scale",
        "Laplace scale halved",
        1000,
        lambda: _central(
            "uniform-half-scale", UniformHalfScale, Group(1, 2.0), "add/remove", "boundary"
        ),
    ),
    Control(
        "uniform-replace-s1",
        "replace pairs against sensitivity=1",
        1000,
        lambda: _central(
            "uniform-replace-s1", Uniform, Group(1, 2.0), "replace", "jumps", sensitivity=1
        ),
    ),
    Control(
        "ba-no-nullify",
        "BA never updates l: no nullification (spec A28)",
        600,
        lambda: _central(
            "ba-no-nullify", BANoNullify, Group(6, 1.5), "add/remove", "jumps", suffix=0
        ),
    ),
    Control(
        "ba-noiseless-dc",
        "BA decides on the un-noised dissimilarity",
        200,
        lambda: _central("ba-noiseless-dc", BANoiselessDC, Group(3, 1.0), "add/remove", "boundary"),
    ),
    Control(
        "lpu-twice", "a device reports at every slot of its window with eps", 300, _local_twice
    ),
    Control(
        "uniform-1.5x-replace", "Uniform noised at 1.5 eps (replace pairs)", 1500, _under_noised
    ),
    Control("local-1.5eps", "a device perturbs its report at 1.5 eps", 1500, _sharp_device),
    Control("period-2x", "OptStream releases every period at 2 eps_P", 1000, _period_doubled),
    Control(
        "draws-2x",
        "every discrete Laplace draw at twice its budget (Sample, worst case)",
        TIGHT_TRIALS,
        lambda: _named(planted(central_case("sample", Sample), draws_doubled), "draws-2x"),
    ),
    Control(
        "draws-2x-period",
        "every discrete Laplace draw at twice its budget (OptStream, worst case)",
        TIGHT_TRIALS,
        lambda: _named(
            planted(period_case("optstream", OptStream), draws_doubled), "draws-2x-period"
        ),
    ),
    Control(
        "grid-halved",
        "grid sensitivity in steps halved (OptStream on sums, worst case)",
        GRID_TRIALS,
        lambda: _named(
            planted(period_case("optstream", OptStream, alpha=1.0), grid_halved), "grid-halved"
        ),
    ),
    Control(
        "optstream-delta",
        "OptStream's PERTURB calibrated to Delta, not k Delta (worst case)",
        TIGHT_TRIALS,
        lambda: _named(
            planted(period_case("optstream", OptStream), perturb_at_delta), "optstream-delta"
        ),
    ),
    Control(
        "uniform-2x",
        "central: Uniform noised at twice its budget (worst case)",
        TIGHT_TRIALS,
        lambda: _named(central_case("uniform", Uniform, UniformHalfScale), "uniform-2x"),
    ),
    Control(
        "optstream-2x",
        "period: strict OptStream releasing at 2 eps_P (worst case)",
        TIGHT_TRIALS,
        lambda: _named(period_case("optstream", OptStream, OptStreamDoubled), "optstream-2x"),
    ),
    Control(
        "wn-uniform-2x",
        "graph: (w,n) Uniform noised at twice its budget (worst case)",
        TIGHT_TRIALS,
        lambda: _named(graph_case("wn_uniform", WNUniform, WNUniformDoubled), "wn-uniform-2x"),
    ),
    Control(
        "lpu-2x",
        "local: the device perturbs at 2 eps (LPU, worst case)",
        TIGHT_TRIALS,
        lambda: _named(local_case("lpu", LPU, DoubledDevice), "lpu-2x"),
    ),
)
"""Every power control, in the order the report lists them."""
