"""The conformance adapter of the mechanisms of kind ``"period"`` (releases known later).

The checks of :mod:`app.dp.checks` drive them through ``step(counts, rng) -> list[Release]``:
a slot may release nothing, or the releases of several earlier slots, so a release may come up
to ``period - 1`` slots late and every period's end releases all its slots. The window
invariant holds by the ledger's per-slot records and by the true loss of period mechanisms (a
window pays ``eps_P`` for every period it touches). :func:`collect` flattens a run into the
releases in the order they became known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.budget import within
from app.dp.checks import Factory, Trace
from app.dp.types import Group, Release


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


class Period:
    """Period mechanisms: central inputs, releases at most ``period - 1`` slots late, every
    release fresh and non-negative; windows checked against the periods they touch."""

    sizes = {
        "state": (3, 2),
        "roundtrip": (3, 1),
        "seeded": (4, 0),
        "shape": (5, 3),
        "input": (1, 1),
    }
    """Slots per check as ``(a, b)``: ``a * period + b``."""

    def size(self, check: str, m: Any) -> int:
        a, b = self.sizes[check]
        return int(a * m.period + b)

    def cuts(self, slots: int) -> Iterable[int]:
        return range(slots + 1)

    def inputs(self, m: Any, rng: np.random.Generator, slots: int) -> list[Any]:
        return list(random_series(rng, slots, len(m.groups), m.d))

    def step(self, m: Any, x: Any, rng: np.random.Generator, trace: Trace) -> list[Release]:
        trace.handed.append((x, x.copy()))
        out: list[Release] = m.step(x, rng)
        trace.releases += out
        return out

    def mid_slot(self, m: Any, rng: np.random.Generator) -> bool:
        return False

    def lag(self, m: Any) -> int:
        return int(m.period) - 1

    def check_release(self, m: Any, r: Release, previous: npt.NDArray[np.float64]) -> None:
        assert r.fresh and r.status == "publish", f"slot {r.slot}: {r.status}"
        assert (r.histogram >= 0).all() and (r.spent >= 0).all(), f"slot {r.slot} negative"

    def invariant_runs(
        self, factory: Factory, rng: np.random.Generator
    ) -> Iterator[tuple[Any, int, list[Group]]]:
        for _ in range(3):
            groups = [Group(int(rng.integers(2, 13)), float(rng.choice([0.1, 0.5, 1.0, 2.0])))]
            groups += [Group(int(rng.integers(1, 13)), float(rng.choice([0.5, 1.0])))]
            m = factory(groups=groups)
            yield m, 10 * m.period + 5, groups

    def window_violations(self, m: Any, trace: Trace, groups: list[Group]) -> list[str]:
        return window_violations(trace.releases, groups, m)

    def bad_params(self, factory: Factory) -> list[tuple[str, Any]]:
        return [("d", 0), ("noise", "gaussian"), ("groups", []), ("sensitivity", 0)]


PERIOD = Period()


__all__ = ["PERIOD", "collect", "random_series", "window_violations"]
