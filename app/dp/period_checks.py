"""Conformance checks for mechanisms of kind ``"period"`` (releases known at a later slot).

The same kinds of checks as :mod:`app.dp.checks` (plain functions, no pytest), adapted to
``step(counts, rng) -> list[Release]``: a slot may release nothing, or the releases of several
earlier slots. :func:`collect` flattens a run into the releases in the order they became known.
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

SECTIONS = ("Paper", "Parameters", "State", "Privacy", "Deviations", "Examples", "References")


def random_series(
    rng: np.random.Generator, slots: int, groups: int, d: int
) -> npt.NDArray[np.int64]:
    """Counts ``(slots, groups, d)``: a smooth daily-like curve per cell plus jumps and noise."""
    t = np.arange(slots)[:, None, None]
    base = rng.uniform(0, 2000, (1, groups, d))
    phase = rng.uniform(0, 2 * np.pi, (1, groups, d))
    curve = base * (1 + 0.5 * np.sin(2 * np.pi * t / 24 + phase))
    jumps = np.cumsum(rng.random((slots, 1, 1)) < 0.05, axis=0) % 2 * rng.uniform(0, 1000)
    noise = rng.poisson(20.0, (slots, groups, d))
    return (np.rint(curve + jumps) + noise).astype(np.int64)


def collect(m: Any, stream: npt.NDArray[np.int64], rng: np.random.Generator) -> list[Release]:
    """Step ``m`` through ``stream``; the releases in the order they became known."""
    out: list[Release] = []
    for counts in stream:
        out.extend(m.step(counts, rng))
    return out


def same_releases(a: list[Release], b: list[Release]) -> bool:
    """Whether two runs released exactly the same thing, bit for bit."""
    return len(a) == len(b) and all(
        x.slot == y.slot
        and np.array_equal(x.histogram, y.histogram)
        and np.array_equal(x.spent, y.spent)
        for x, y in zip(a, b, strict=True)
    )


def window_violations(releases: list[Release], groups: list[Group], m: Any) -> list[str]:
    """Windows that overspend, by the ledger's per-slot records (``Release.spent``) and by the
    true loss of period mechanisms: a window pays ``eps_P`` for every period it touches."""
    spent = np.array([r.spent for r in sorted(releases, key=lambda r: r.slot)])
    n, period = len(spent), m.period
    bad = []
    for g, group in enumerate(groups):
        sums = np.convolve(spent[:, g], np.ones(group.w), mode="full")[:n]
        worst = int(np.argmax(sums))
        if not within(float(sums[worst]), group.eps):
            bad.append(f"group {g} {group}: ledger window ending at {worst + 1}: {sums[worst]}")
        for end in range(1, n + 1):  # windows [end - w + 1, end], 1-based slots
            first = max(1, end - group.w + 1)
            touched = (end - 1) // period - (first - 1) // period + 1
            if not within(touched * m.period_eps, group.eps):
                bad.append(f"group {g} {group}: window ending at {end} touches {touched} periods")
                break
    return bad


def check_state_msgpack(factory: Factory, rng: np.random.Generator) -> None:
    """``state_dict()`` survives strict msgpack unchanged after every slot (mid-period too)."""
    m = factory()
    stream = random_series(rng, 3 * m.period + 2, len(m.groups), m.d)
    for t in range(len(stream) + 1):
        blob = m.state_dict()
        packed = msgpack.packb(blob, use_bin_type=True, strict_types=True)
        assert msgpack.unpackb(packed, raw=False, strict_map_key=True) == blob, f"slot {t}"
        if t < len(stream):
            m.step(stream[t], rng)


def check_state_roundtrip(factory: Factory, rng: np.random.Generator) -> None:
    """Stop after any slot, load into a fresh instance, continue: the same releases."""
    probe = factory()
    stream = random_series(rng, 3 * probe.period + 1, len(probe.groups), probe.d)
    seed = int(rng.integers(2**32))
    whole = collect(factory(), stream, np.random.default_rng(seed))
    for cut in range(len(stream) + 1):
        r = np.random.default_rng(seed)
        first = factory()
        head = collect(first, stream[:cut], r)
        blob = msgpack.unpackb(msgpack.packb(first.state_dict()), strict_map_key=True)
        second = factory()
        second.load_state(blob)
        assert same_releases(head + collect(second, stream[cut:], r), whole), f"cut at {cut}"


def check_state_refuses_other_params(factory: Factory, rng: np.random.Generator) -> None:
    """``load_state`` refuses a blob written with other parameters."""
    m = factory()
    try:
        factory(d=m.d + 1).load_state(m.state_dict())
    except StateMismatchError as exc:
        assert "fingerprint" in str(exc), str(exc)
    else:
        raise AssertionError("load_state accepted a state written with another d")


def check_seeded_determinism(factory: Factory, rng: np.random.Generator) -> None:
    """Equally seeded instances give identical releases."""
    probe = factory()
    stream = random_series(rng, 4 * probe.period, len(probe.groups), probe.d)
    seed = int(rng.integers(2**32))
    a = collect(factory(), stream, np.random.default_rng(seed))
    b = collect(factory(), stream, np.random.default_rng(seed))
    assert a and same_releases(a, b)


def check_release_shape(factory: Factory, rng: np.random.Generator) -> None:
    """Every slot is released exactly once, in slot order, never before it happened and at
    most ``period - 1`` slots after; histograms of length ``d`` and ``>= 0``; spending per
    group."""
    m = factory()
    stream = random_series(rng, 5 * m.period + 3, len(m.groups), m.d)
    released = 0
    for t, counts in enumerate(stream, start=1):
        for r in m.step(counts, rng):
            released += 1
            assert r.slot == released, f"slot {t} released {r.slot}, expected {released}"
            assert t - m.period < r.slot <= t, f"slot {r.slot} released at {t}"
            assert r.mechanism == m.name and r.fresh and r.status == "publish"
            assert r.histogram.shape == (m.d,) and r.spent.shape == (len(m.groups),)
            assert (r.histogram >= 0).all() and (r.spent >= 0).all()
        if t % m.period == 0:
            assert released == t, f"slot {t} ends a period but only {released} were released"
    assert released == len(stream) - len(stream) % m.period


def check_input_unchanged(factory: Factory, rng: np.random.Generator) -> None:
    """``step`` leaves its input unchanged."""
    m = factory()
    counts = rng.integers(0, 1000, (len(m.groups), m.d))
    copy = counts.copy()
    for _ in range(m.period + 1):
        m.step(counts, rng)
    assert np.array_equal(counts, copy)


def check_window_invariant(factory: Factory, rng: np.random.Generator) -> None:
    """With random group mixes, every window of ``w_g`` slots (straddling periods or not)
    spends at most ``eps_g``, by the ledger and by the periods it touches."""
    for _ in range(3):
        groups = [Group(int(rng.integers(2, 13)), float(rng.choice([0.1, 0.5, 1.0, 2.0])))]
        groups += [Group(int(rng.integers(1, 13)), float(rng.choice([0.5, 1.0])))]
        m = factory(groups=groups)
        releases = collect(m, random_series(rng, 10 * m.period + 5, len(groups), m.d), rng)
        assert not window_violations(releases, groups, m), window_violations(releases, groups, m)


def check_bad_params(factory: Factory, rng: np.random.Generator) -> None:
    """Bad parameters raise ``ParameterError`` naming the parameter."""
    for name, value in (("d", 0), ("noise", "gaussian"), ("groups", []), ("sensitivity", 0)):
        try:
            factory(**{name: value})
        except ParameterError as exc:
            assert name in str(exc), f"{name}: {exc}"
        else:
            raise AssertionError(f"{name}={value!r} was accepted")


def check_docstring(factory: Factory, rng: np.random.Generator) -> None:
    """The class docstring has the Paper, Privacy, Examples... sections."""
    doc = inspect.getdoc(type(factory())) or ""
    missing = [s for s in SECTIONS if f"\n{s}\n" + "-" * len(s) not in doc]
    assert not missing, f"missing docstring sections {missing}"


PERIOD_CHECKS: tuple[Check, ...] = (
    check_state_msgpack,
    check_state_roundtrip,
    check_state_refuses_other_params,
    check_seeded_determinism,
    check_release_shape,
    check_input_unchanged,
    check_window_invariant,
    check_bad_params,
    check_docstring,
)


def yield_period_checks() -> Iterator[Check]:
    """The checks for mechanisms of kind ``"period"``."""
    yield from PERIOD_CHECKS


__all__ = ["PERIOD_CHECKS", "collect", "window_violations", "yield_period_checks"]
