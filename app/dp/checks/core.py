"""The conformance checks every registered mechanism must pass, whatever its kind.

Plain functions, no pytest. One set of checks (:data:`CHECKS`) is written once against an
:class:`Adapter`, which says for one kind of mechanism what a slot's input is, how one slot is
run, how late a release may come, which windows must hold and which parameters are bad. Each
family's adapter lives in its family (:mod:`app.dp.central.checks`, :mod:`app.dp.wn.checks`,
:mod:`app.dp.period.checks`, :mod:`app.dp.local.checks`).

:func:`~app.dp.checks.suite.yield_checks` binds the checks to a kind's adapter: each bound
check takes a *factory* (``factory(**overrides)`` builds a fresh mechanism from the class's
:meth:`~app.dp.mechanism.Mechanism.test_params` with overrides) and a seeded generator, and
raises ``AssertionError`` with a message when the mechanism fails. ``tests/dp/test_conformance.py``
runs one case per (registered mechanism, check); ``dpstream check`` runs them on a deployment.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack
import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError, StateMismatchError
from app.dp.types import Group, Release

Factory = Callable[..., Any]
Check = Callable[[Factory, np.random.Generator], None]

DOC_SECTIONS = ("Paper", "Parameters", "State", "Privacy", "Deviations", "Examples", "References")


# -- what a kind of mechanism brings -----------------------------------------------------------
@dataclass
class Trace:
    """What a run showed: the releases in the order they became known, every object handed to
    the mechanism with a copy taken before, and (local mechanisms) every collection request."""

    releases: list[Release] = field(default_factory=list)
    handed: list[tuple[Any, Any]] = field(default_factory=list)
    requests: list[Any] = field(default_factory=list)


class ReleasesAtOnce:
    """The defaults of an :class:`Adapter` for a kind whose ``step`` releases its own slot at
    once: sizes from ``sizes``, a cut after any slot, no mid-slot state, no lag, no assertion
    of its own on a release."""

    sizes: dict[str, int]

    def size(self, check: str, m: Any) -> int:
        return self.sizes[check]

    def cuts(self, slots: int) -> Iterable[int]:
        return range(slots + 1)

    def mid_slot(self, m: Any, rng: np.random.Generator) -> bool:
        return False

    def lag(self, m: Any) -> int:
        return 0

    def check_release(self, m: Any, r: Any, previous: npt.NDArray[np.float64]) -> None:
        return None


class Adapter(Protocol):
    """How the kind-independent checks drive one kind of mechanism."""

    def size(self, check: str, m: Any) -> int:
        """Slots to run in ``check`` (``state``, ``roundtrip``, ``seeded``, ``shape``,
        ``input``)."""

    def cuts(self, slots: int) -> Iterable[int]:
        """The slots after which ``roundtrip`` stops and resumes on a fresh instance."""

    def inputs(self, m: Any, rng: np.random.Generator, slots: int) -> list[Any]:
        """One input per slot; a run cut at any slot and resumed sees the same inputs."""

    def step(self, m: Any, x: Any, rng: np.random.Generator, trace: Trace) -> list[Release]:
        """Run one slot on input ``x``; the releases it made known (also added to ``trace``)."""

    def mid_slot(self, m: Any, rng: np.random.Generator) -> bool:
        """Move ``m`` into a slot it has not closed, if the kind has such a state."""

    def lag(self, m: Any) -> int:
        """How many slots after its own a slot's release may become known."""

    def check_release(self, m: Any, r: Release, previous: npt.NDArray[np.float64]) -> None:
        """The kind's own assertions on one release (``previous``: the last histogram)."""

    def invariant_runs(
        self, factory: Factory, rng: np.random.Generator
    ) -> Iterator[tuple[Any, int, list[Group]]]:
        """``(mechanism, slots, groups)`` runs on which the window invariant must hold."""

    def window_violations(self, m: Any, trace: Trace, groups: list[Group]) -> list[str]:
        """The windows that spent more than their budget (empty: none)."""

    def bad_params(self, factory: Factory) -> list[tuple[str, Any]]:
        """Parameters (name, value) the constructor must refuse, naming the parameter."""


def run(adapter: Adapter, m: Any, inputs: list[Any], rng: np.random.Generator) -> Trace:
    """Run ``m`` through ``inputs``."""
    trace = Trace()
    for x in inputs:
        adapter.step(m, x, rng, trace)
    return trace


def same(a: Any, b: Any, ignore: frozenset[str] = frozenset()) -> bool:
    """Whether two values are exactly equal: arrays element by element, dataclasses (releases,
    tallies) field by field but for the ``ignore`` fields, everything else by ``==``."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name))
            for f in dataclasses.fields(a)
            if f.name not in ignore
        )
    return bool(a == b)


WHO = frozenset({"mechanism", "version"})
"""The fields of a release that say who made it, not what it released."""


def same_releases(a: list[Release], b: list[Release]) -> bool:
    """Whether two runs released exactly the same thing, every field but :data:`WHO`, bit for
    bit (two mechanisms may release the same thing)."""
    return len(a) == len(b) and all(same(x, y, WHO) for x, y in zip(a, b, strict=True))


def through_msgpack(blob: Any) -> Any:
    """``blob`` packed with strict types and unpacked with strict map keys."""
    packed = msgpack.packb(blob, use_bin_type=True, strict_types=True)
    return msgpack.unpackb(packed, raw=False, strict_map_key=True)


# -- the checks --------------------------------------------------------------------------------
def _state_survives(m: Any, factory: Factory, moment: str) -> None:
    blob = m.state_dict()
    assert through_msgpack(blob) == blob, f"state changed through msgpack ({moment})"
    fresh = factory()
    fresh.load_state(through_msgpack(blob))
    assert fresh.state_dict() == blob, f"load_state then state_dict differs ({moment})"


def check_state_msgpack(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """``state_dict()`` survives strict msgpack unchanged and loads into a fresh instance that
    gives it back, before and after every slot, and in the middle of one."""
    m = factory()
    inputs = a.inputs(m, rng, a.size("state", m))
    trace = Trace()
    for t in range(len(inputs) + 1):
        _state_survives(m, factory, f"slot {t}")
        if t < len(inputs):
            a.step(m, inputs[t], rng, trace)
    if a.mid_slot(m, rng):
        _state_survives(m, factory, "mid-slot")


def check_state_roundtrip(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """Stop after a slot, load into a fresh instance, continue: the same releases."""
    probe = factory()
    inputs = a.inputs(probe, rng, a.size("roundtrip", probe))
    seed = int(rng.integers(2**32))
    whole = run(a, factory(), inputs, np.random.default_rng(seed)).releases
    for cut in a.cuts(len(inputs)):
        r = np.random.default_rng(seed)
        first = factory()
        head = run(a, first, inputs[:cut], r).releases
        second = factory()
        second.load_state(through_msgpack(first.state_dict()))
        tail = run(a, second, inputs[cut:], r).releases
        assert same_releases(head + tail, whole), f"resuming after slot {cut} changed releases"


def check_state_refuses_other_params(
    a: Adapter, factory: Factory, rng: np.random.Generator
) -> None:
    """``load_state`` refuses a blob written with other parameters."""
    m = factory()
    try:
        factory(d=m.d + 1).load_state(m.state_dict())
    except StateMismatchError as exc:
        assert "fingerprint" in str(exc), str(exc)
    else:
        raise AssertionError("load_state accepted a state written with another d")


def check_seeded_determinism(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """Equally seeded instances give identical releases."""
    probe = factory()
    inputs = a.inputs(probe, rng, a.size("seeded", probe))
    seed = int(rng.integers(2**32))
    first = run(a, factory(), inputs, np.random.default_rng(seed)).releases
    second = run(a, factory(), inputs, np.random.default_rng(seed)).releases
    assert first, "nothing was released"
    assert same_releases(first, second), "equal seeds gave different releases"


def check_release_shape(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """Every slot is released once, in order, at most ``lag`` slots late; a histogram of
    length ``d``, spending per group; a repeated release spends no publication budget and
    repeats the last histogram; then the kind's own rules."""
    m = factory()
    inputs = a.inputs(m, rng, a.size("shape", m))
    every = a.lag(m) + 1
    released, previous, trace = 0, np.zeros(m.d), Trace()
    for t, x in enumerate(inputs, start=1):
        for r in a.step(m, x, rng, trace):
            released += 1
            assert r.slot == released, f"slot {t} released {r.slot}, expected {released}"
            assert t - every < r.slot <= t, f"slot {r.slot} released at {t}"
            assert r.mechanism == m.name and r.version == m.version, (r.mechanism, r.version)
            assert r.histogram.shape == (m.d,), f"histogram shape {r.histogram.shape}"
            assert r.spent.shape == (len(m.groups),), f"spent shape {r.spent.shape}"
            assert (r.spent_dc >= 0).all() and (r.spent_pub >= 0).all()
            if not r.fresh:
                assert r.status in ("skip", "nullified"), f"slot {r.slot} status {r.status}"
                assert not r.spent_pub.any(), f"slot {r.slot} repeat spent publication budget"
                assert np.array_equal(r.histogram, previous), f"slot {t} repeated something else"
            a.check_release(m, r, previous)
            previous = r.histogram
        if t % every == 0:
            assert released == t, f"slot {t} ends a period but only {released} were released"
    assert released == len(inputs) - len(inputs) % every


def check_input_unchanged(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """The mechanism leaves everything it is handed unchanged."""
    m = factory()
    trace = run(a, m, a.inputs(m, rng, a.size("input", m)), rng)
    assert trace.handed, "nothing was handed to the mechanism"
    for i, (given, before) in enumerate(trace.handed):
        assert same(given, before), f"input {i} changed"


def check_window_invariant(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """On long random runs (random group mixes where the kind takes them), every window of
    every group spends at most its budget."""
    for m, slots, groups in a.invariant_runs(factory, rng):
        trace = run(a, m, a.inputs(m, rng, slots), rng)
        bad = a.window_violations(m, trace, groups)
        assert not bad, "; ".join(bad[:5])


def check_bad_params(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """Bad parameters raise ``ParameterError`` naming the parameter."""
    for name, value in a.bad_params(factory):
        try:
            factory(**{name: value})
        except ParameterError as exc:
            assert name in str(exc), f"{name}={value!r} raised without naming it: {exc}"
        else:
            raise AssertionError(f"{name}={value!r} was accepted")


def check_population_required(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """A mechanism that runs OBS refuses a slot without the public population (issue 16): it
    never falls back to the slot's own counts, which would make the noise scale data-driven.
    (Only central mechanisms run OBS; for the others the check holds trivially.)"""
    m = factory()
    if not getattr(m, "uses_obs", False):
        return
    counts = rng.integers(0, 10, (len(m.groups), m.d))
    try:
        m.step(counts, rng)
    except ParameterError as exc:
        assert "population" in str(exc), str(exc)
        assert m.t == 0, "a refused slot advanced the mechanism"
    else:
        raise AssertionError("step ran OBS without a public population")


def check_docstring(a: Adapter, factory: Factory, rng: np.random.Generator) -> None:
    """The class docstring has every section of the house style, in order, and its Privacy
    section names the neighbouring relation the guarantee is for."""
    doc = inspect.getdoc(type(factory())) or ""
    where = [doc.find(f"\n{s}\n{'-' * len(s)}") for s in DOC_SECTIONS]
    missing = [s for s, i in zip(DOC_SECTIONS, where, strict=True) if i < 0]
    assert not missing, f"missing docstring sections {missing}"
    assert where == sorted(where), "docstring sections out of order"
    privacy = doc[where[DOC_SECTIONS.index("Privacy")] : where[DOC_SECTIONS.index("Privacy") + 1]]
    assert "eighbour" in privacy, "the Privacy section does not name its neighbouring relation"


CHECKS: tuple[Callable[[Adapter, Factory, np.random.Generator], None], ...] = (
    check_state_msgpack,
    check_state_roundtrip,
    check_state_refuses_other_params,
    check_seeded_determinism,
    check_release_shape,
    check_input_unchanged,
    check_window_invariant,
    check_bad_params,
    check_population_required,
    check_docstring,
)


def factory_for(cls: type, **fixed: Any) -> Factory:
    """A factory building ``cls`` from its ``test_params`` updated by ``fixed`` and overrides."""

    def build(**overrides: Any) -> Any:
        return cls(**{**cls.test_params(), **fixed, **overrides})  # type: ignore[attr-defined]

    return build


__all__ = [
    "CHECKS",
    "Adapter",
    "Check",
    "Factory",
    "Trace",
    "factory_for",
    "run",
    "same",
    "same_releases",
    "through_msgpack",
]
