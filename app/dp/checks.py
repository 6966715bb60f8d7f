"""The conformance checks every registered mechanism must pass.

Plain functions, no pytest: each takes a *factory* (``factory(**overrides)`` builds a fresh
mechanism from the class's :meth:`~app.dp.mechanism.Mechanism.test_params` with overrides) and
a seeded generator, and raises ``AssertionError`` with a message when the mechanism fails.
:func:`yield_checks` picks the checks for a mechanism's kind; ``tests/dp/test_conformance.py``
runs one case per (mechanism, check), and ``dpstream check`` can run them on a deployment.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

from app.dp.budget import within
from app.dp.errors import ParameterError, StateMismatchError
from app.dp.types import Group, Release

Factory = Callable[..., Any]
Check = Callable[[Factory, np.random.Generator], None]

DOC_SECTIONS = ("Paper", "Parameters", "State", "Privacy", "Deviations", "Examples", "References")


def random_stream(
    rng: np.random.Generator, slots: int, groups: int, d: int
) -> npt.NDArray[np.int64]:
    """Counts ``(slots, groups, d)`` that hold still for a while, then jump.

    Each slot keeps the previous counts with probability 0.7 and otherwise draws new ones on a
    log-uniform scale up to 10**5 users per cell, so adaptive mechanisms both skip and publish.
    """
    out = np.empty((slots, groups, d), dtype=np.int64)
    current = np.zeros((groups, d), dtype=np.int64)
    jumps = rng.random(slots) < 0.3
    for t in range(slots):
        if jumps[t]:
            scale = 10.0 ** rng.uniform(0, 5)
            current = rng.poisson(scale * rng.random((groups, d))).astype(np.int64)
        out[t] = current
    return out


def random_groups(rng: np.random.Generator, max_groups: int = 5) -> list[Group]:
    """A random mix of requirement levels, windows 1..40 and budgets 0.1..2."""
    m = int(rng.integers(1, max_groups + 1))
    return [
        Group(int(rng.integers(1, 41)), float(rng.choice([0.1, 0.2, 0.5, 0.6, 1.0, 2.0])))
        for _ in range(m)
    ]


USERS_PER_GROUP = 10**5
"""The public population per group the checks pass to ``step`` (the scale of
:func:`random_stream`'s cells); fixed before the data, as a service configures it."""


def population(mechanism: Any) -> list[int]:
    """The public users per declared group that the checks give ``mechanism.step``."""
    return [USERS_PER_GROUP] * len(mechanism.groups)


def run(mechanism: Any, stream: npt.NDArray[np.int64], rng: np.random.Generator) -> list[Release]:
    """Step ``mechanism`` through every slot of ``stream``."""
    users = population(mechanism)
    return [mechanism.step(counts, rng, users) for counts in stream]


def same_releases(a: list[Release], b: list[Release]) -> bool:
    """Whether two runs released exactly the same thing, bit for bit."""
    return len(a) == len(b) and all(
        x.slot == y.slot
        and x.status == y.status
        and np.array_equal(x.histogram, y.histogram)
        and np.array_equal(x.spent_dc, y.spent_dc)
        and np.array_equal(x.spent_pub, y.spent_pub)
        for x, y in zip(a, b, strict=True)
    )


def window_violations(releases: list[Release], groups: list[Group]) -> list[str]:
    """Every (group, window) whose total spending exceeds ``eps_g``, or whose publication
    spending exceeds what the mechanism allows; empty when the invariant holds."""
    spent = np.array([r.spent for r in releases])
    bad = []
    for g, group in enumerate(groups):
        sums = np.convolve(spent[:, g], np.ones(group.w), mode="full")[: len(releases)]
        worst = int(np.argmax(sums))
        if not within(float(sums[worst]), group.eps):
            bad.append(f"group {g} {group}: window ending at slot {worst + 1} spent {sums[worst]}")
    return bad


def check_state_msgpack(factory: Factory, rng: np.random.Generator) -> None:
    """``state_dict()`` survives strict msgpack unchanged, before and after some slots."""
    m = factory()
    stream = random_stream(rng, 30, len(m.groups), m.d)
    for t in range(len(stream) + 1):
        blob = m.state_dict()
        packed = msgpack.packb(blob, use_bin_type=True, strict_types=True)
        assert msgpack.unpackb(packed, raw=False, strict_map_key=True) == blob, f"slot {t}"
        if t < len(stream):
            m.step(stream[t], rng, population(m))


def check_state_roundtrip(factory: Factory, rng: np.random.Generator) -> None:
    """Stop after any slot, load into a fresh instance, continue: the same releases."""
    probe = factory()
    stream = random_stream(rng, 40, len(probe.groups), probe.d)
    seed = int(rng.integers(2**32))
    whole = run(factory(), stream, np.random.default_rng(seed))
    for cut in range(len(stream) + 1):
        r = np.random.default_rng(seed)
        first = factory()
        head = run(first, stream[:cut], r)
        blob = msgpack.unpackb(msgpack.packb(first.state_dict()), strict_map_key=True)
        second = factory()
        second.load_state(blob)
        assert same_releases(head + run(second, stream[cut:], r), whole), f"cut at {cut}"


def check_state_refuses_other_params(factory: Factory, rng: np.random.Generator) -> None:
    """``load_state`` refuses a blob written with other parameters."""
    m = factory()
    other = factory(d=m.d + 1)
    try:
        other.load_state(m.state_dict())
    except StateMismatchError as exc:
        assert "fingerprint" in str(exc), str(exc)
    else:
        raise AssertionError("load_state accepted a state written with another d")


def check_seeded_determinism(factory: Factory, rng: np.random.Generator) -> None:
    """Equally seeded instances give identical releases."""
    probe = factory()
    stream = random_stream(rng, 50, len(probe.groups), probe.d)
    seed = int(rng.integers(2**32))
    a = run(factory(), stream, np.random.default_rng(seed))
    b = run(factory(), stream, np.random.default_rng(seed))
    assert same_releases(a, b)


def check_release_shape(factory: Factory, rng: np.random.Generator) -> None:
    """Histogram of length d; spending per group; a repeated release spends no publication."""
    m = factory()
    stream = random_stream(rng, 200, len(m.groups), m.d)
    previous = np.zeros(m.d)
    for t, counts in enumerate(stream, start=1):
        r = m.step(counts, rng, population(m))
        assert r.slot == t and r.mechanism == m.name
        assert r.histogram.shape == (m.d,) and r.spent.shape == (len(m.groups),)
        assert (r.spent_dc >= 0).all() and (r.spent_pub >= 0).all()
        if not r.fresh:
            assert r.status in ("skip", "nullified") and not r.spent_pub.any()
            assert np.array_equal(r.histogram, previous), f"slot {t} repeated something else"
        previous = r.histogram


def check_input_unchanged(factory: Factory, rng: np.random.Generator) -> None:
    """``step`` leaves its input unchanged."""
    m = factory()
    counts = rng.integers(0, 1000, (len(m.groups), m.d))
    copy = counts.copy()
    for _ in range(5):
        m.step(counts, rng, population(m))
    assert np.array_equal(counts, copy)


def check_window_invariant(factory: Factory, rng: np.random.Generator) -> None:
    """On a long random stream with a random group mix, every group spends at most ``eps_g``
    in every window of ``w_g`` slots."""
    groups = random_groups(rng)
    m = factory(groups=groups)
    releases = run(m, random_stream(rng, 2000, len(groups), m.d), rng)
    assert not window_violations(releases, groups), window_violations(releases, groups)


def check_bad_params(factory: Factory, rng: np.random.Generator) -> None:
    """Bad parameters raise ``ParameterError`` naming the parameter."""
    for name, value in (("d", 0), ("noise", "gaussian"), ("groups", [])):
        try:
            factory(**{name: value})
        except ParameterError as exc:
            assert name in str(exc), f"{name}: {exc}"
        else:
            raise AssertionError(f"{name}={value!r} was accepted")


def check_population_required(factory: Factory, rng: np.random.Generator) -> None:
    """A mechanism that runs OBS refuses a slot without the public population (issue 16): it
    never falls back to the slot's own counts, which would make the noise scale data-driven."""
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


def check_docstring(factory: Factory, rng: np.random.Generator) -> None:
    """The class docstring has the Paper, Privacy, Examples... sections."""
    doc = inspect.getdoc(type(factory())) or ""
    missing = [s for s in DOC_SECTIONS if f"\n{s}\n" + "-" * len(s) not in doc]
    assert not missing, f"missing docstring sections {missing}"


CENTRAL_CHECKS: tuple[Check, ...] = (
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


def yield_checks(kind: str) -> Iterator[Check]:
    """The checks for mechanisms of ``kind`` (``"central"`` or ``"local"``)."""
    if kind == "central":
        yield from CENTRAL_CHECKS
    elif kind == "local":
        from app.dp.local.checks import yield_local_checks  # the local family's own checks

        yield from yield_local_checks()
    elif kind == "graph":
        from app.dp.wn.checks import yield_graph_checks  # the (w,n) family's own checks

        yield from yield_graph_checks()
    elif kind == "period":
        from app.dp.period_checks import yield_period_checks  # releases known at a later slot

        yield from yield_period_checks()
    else:
        raise ValueError(f"no checks for kind {kind!r}")


def factory_for(cls: type, **fixed: Any) -> Factory:
    """A factory building ``cls`` from its ``test_params`` updated by ``fixed`` and overrides."""

    def build(**overrides: Any) -> Any:
        return cls(**{**cls.test_params(), **fixed, **overrides})  # type: ignore[attr-defined]

    return build


__all__ = ["CENTRAL_CHECKS", "factory_for", "yield_checks"]
