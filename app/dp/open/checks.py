"""The conformance adapter of the open-domain mechanisms, for the suite's generic checks.

:mod:`app.dp.checks.core` writes its checks against an adapter; those that do not assume a count
vector of length ``d`` (state through msgpack, resume after any slot, seeded determinism, input
unchanged, window invariant, bad parameters, docstring) run on :data:`OPEN` in
``tests/dp/open/test_conformance_open.py``, beside the open-domain shape checks there. A slot's
input is its events (:class:`Events`, from :func:`random_events`); the window invariant reads
each release's ``eps_spent`` and ``delta_spent`` per level, exactly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.budget import exact
from app.dp.checks import Factory, ReleasesAtOnce, Trace
from app.dp.open.ledger import Level
from app.dp.types import IntArray


@dataclass(frozen=True)
class Events:
    """One slot's events: ``users[i]`` sent ``keys[i]``."""

    users: IntArray
    keys: npt.NDArray[np.str_]


def random_events(rng: np.random.Generator, slots: int, max_users: int = 300) -> list[Events]:
    """Slots of events over a Zipf-like vocabulary (a few keys many users send, a long tail
    of rare ones, and now and then a key nobody sent before), each user sending 1-6 keys with
    repeats, so that selection, public keys, retirement and bounding all happen."""
    out = []
    for _ in range(slots):
        n = int(rng.integers(0, max_users + 1))
        per_user = rng.integers(1, 7, size=n)
        users = np.repeat(rng.choice(10**6, size=n, replace=False), per_user)
        ranks = np.minimum(rng.zipf(1.3, size=users.size), 10**4)
        fresh = rng.random(users.size) < 0.02
        keys = np.where(
            fresh,
            np.char.add("new-", rng.integers(0, 10**9, size=users.size).astype(str)),
            np.char.add("k", ranks.astype(str)),
        )
        order = rng.permutation(users.size)
        out.append(Events(users[order].astype(np.int64), keys[order]))
    return out


def random_levels(rng: np.random.Generator, max_levels: int = 3) -> list[Level]:
    """A random mix of levels: windows 1..12, eps 1..10, delta 1e-6..1e-3."""
    return [
        Level(
            int(rng.integers(1, 13)),
            float(rng.choice([1.0, 2.0, 5.0, 10.0])),
            float(rng.choice([1e-6, 1e-5, 1e-4, 1e-3])),
        )
        for _ in range(int(rng.integers(1, max_levels + 1)))
    ]


def window_violations(releases: Sequence[Any], levels: Sequence[Level]) -> list[str]:
    """Every level whose eps or delta summed over some window of ``w`` slots of releases
    (:class:`~app.dp.open.release.OpenRelease`) exceeds its own
    (exact comparison of the releases' recorded fractions)."""
    bad = []
    for i, level in enumerate(levels):
        for what, limit in (("eps", exact(level.eps)), ("delta", exact(level.delta))):
            spent = [getattr(r, f"{what}_spent")[i] for r in releases]
            for end in range(len(spent)):
                total = sum(spent[max(0, end - level.w + 1) : end + 1])
                if total > limit:
                    bad.append(f"level {i} {level}: {what} {total} in the window ending {end + 1}")
    return bad


class Open(ReleasesAtOnce):
    """Open-domain mechanisms: a slot's input is its events; ``step`` releases it at once."""

    sizes = {"state": 20, "roundtrip": 16, "seeded": 30, "shape": 80, "input": 5}
    invariant_slots = 300

    def inputs(self, m: Any, rng: np.random.Generator, slots: int) -> list[Any]:
        return list(random_events(rng, slots))

    def step(self, m: Any, x: Any, rng: np.random.Generator, trace: Trace) -> list[Any]:
        trace.handed.append((x, Events(x.users.copy(), x.keys.copy())))
        out = [m.step(x.users, x.keys, rng)]
        trace.releases += out
        return out

    def invariant_runs(
        self, factory: Factory, rng: np.random.Generator
    ) -> Iterator[tuple[Any, int, list[Any]]]:
        levels = random_levels(rng)
        yield factory(levels=levels, population=10**6), self.invariant_slots, levels

    def window_violations(self, m: Any, trace: Trace, groups: list[Any]) -> list[str]:
        return window_violations(trace.releases, groups)

    def bad_params(self, factory: Factory) -> list[tuple[str, Any]]:
        return [
            ("levels", []),
            ("population", 0),
            ("population", 3),
            ("max_keys", 0),
            ("sensitivity", 3),
            ("retire_after", 0),
            ("selection_share", 0.0),
            ("selection_share", 1.5),
        ]


OPEN = Open()
