"""The conformance adapter of the central mechanisms (kind ``"central"``).

The checks of :mod:`app.dp.checks` drive them one slot at a time: a slot's input is its true
counts per group, ``(m, d)``, from :func:`random_stream`, with the public :func:`population`;
``step`` releases that slot at once. The window invariant is checked from the releases' spending
on random group mixes (:func:`random_groups`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.budget import within
from app.dp.checks import Factory, ReleasesAtOnce, Trace
from app.dp.types import Group, Release


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


def window_violations(releases: list[Release], groups: list[Group]) -> list[str]:
    """Every group whose worst window of ``w_g`` slots spent more than ``eps_g`` (by
    ``Release.spent``); empty when the w-event invariant holds."""
    spent = np.array([r.spent for r in releases])
    bad = []
    for g, group in enumerate(groups):
        sums = np.convolve(spent[:, g], np.ones(group.w), mode="full")[: len(releases)]
        worst = int(np.argmax(sums))
        if not within(float(sums[worst]), group.eps):
            bad.append(f"group {g} {group}: window ending at slot {worst + 1} spent {sums[worst]}")
    return bad


class Central(ReleasesAtOnce):
    """Central mechanisms: a slot's input is its true counts per group, ``(m, d)``, with the
    public :func:`population`; ``step`` releases that slot at once."""

    sizes = {"state": 30, "roundtrip": 40, "seeded": 50, "shape": 200, "input": 5}
    invariant_slots = 2000

    def inputs(self, m: Any, rng: np.random.Generator, slots: int) -> list[Any]:
        return list(random_stream(rng, slots, len(m.groups), m.d))

    def step(self, m: Any, x: Any, rng: np.random.Generator, trace: Trace) -> list[Release]:
        trace.handed.append((x, x.copy()))
        out = [m.step(x, rng, population(m))]
        trace.releases += out
        return out

    def invariant_runs(
        self, factory: Factory, rng: np.random.Generator
    ) -> Iterator[tuple[Any, int, list[Group]]]:
        groups = random_groups(rng)
        yield factory(groups=groups), self.invariant_slots, groups

    def window_violations(self, m: Any, trace: Trace, groups: list[Group]) -> list[str]:
        return window_violations(trace.releases, groups)

    def bad_params(self, factory: Factory) -> list[tuple[str, Any]]:
        return [("d", 0), ("noise", "gaussian"), ("groups", [])]


CENTRAL = Central()


__all__ = [
    "CENTRAL",
    "USERS_PER_GROUP",
    "Central",
    "population",
    "random_groups",
    "random_stream",
    "window_violations",
]
