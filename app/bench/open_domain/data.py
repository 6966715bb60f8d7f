"""Slots of ``(user, key)`` events over an open key space, read in place (never copied).

* ``tdrive``: a taxi is a user and the key is the cell of a ``grid x grid`` grid over the
  Beijing box (:data:`app.bench.wn.data.BOX`) it reported from; ``slot_min``-minute
  slots. At 50 x 50 the grid has 2,500 cells, of which the run sees a few hundred to thousands.
* ``diginetica``: a session is a user and the key is an item id; ``slot_days``-day slots.
* ``gen-keys``: generated (no public data): ``users`` users, each active with probability
  ``active`` per slot, send one key drawn from a Zipf law over ``keys`` ids whose ranking
  drifts by ``drift`` ids per slot, so new keys keep appearing. For ``--quick`` and tests.

Every slot is bounded once, before any method sees it: each user keeps ``max_keys`` of its
distinct keys, drawn by a seeded permutation. All methods count the same events, and the truth
of a slot is their distinct-user count per key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.bench.engine.datasets.tdrive import default_dir, read_fixes
from app.bench.wn.data import BOX, read_diginetica

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Slot:
    """One slot's events: ``users[i]`` sent ``keys[i]`` (strings)."""

    users: IntArray
    keys: npt.NDArray[np.str_]


@dataclass(frozen=True)
class Events:
    """A dataset as slots, with its stated population (the users who ever appear)."""

    name: str
    slots: list[Slot]
    population: int


def _split(name: str, user: IntArray, slot: IntArray, key: npt.NDArray[np.str_]) -> Events:
    order = np.argsort(slot, kind="stable")
    user, slot, key = user[order], slot[order], key[order]
    edges = np.searchsorted(slot, np.arange(int(slot.max()) + 2))
    slots = [Slot(user[a:b], key[a:b]) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return Events(name, slots, int(np.unique(user).size))


def tdrive(grid: int = 50, slot_min: int = 60) -> Events:
    """T-Drive taxis' cells on a ``grid x grid`` grid in ``slot_min``-minute slots."""
    ids, secs, lon, lat = read_fixes(default_dir())
    lon0, lon1, lat0, lat1 = BOX
    inside = (lon >= lon0) & (lon < lon1) & (lat >= lat0) & (lat < lat1)
    ids, secs, lon, lat = ids[inside], secs[inside], lon[inside], lat[inside]
    col = ((lon - lon0) / (lon1 - lon0) * grid).astype(np.int64)
    row = ((lat - lat0) / (lat1 - lat0) * grid).astype(np.int64)
    slot = (secs - secs.min()) // (slot_min * 60)
    return _split("tdrive", ids.astype(np.int64), slot, (row * grid + col).astype(str))


def diginetica(slot_days: int = 7) -> Events:
    """Diginetica item views: sessions as users, item ids as keys, ``slot_days``-day slots."""
    views = read_diginetica()
    first = min(v[1] for v in views)
    user = np.array([v[0] for v in views], dtype=np.int64)
    slot = np.array([(v[1] - first).days // slot_days for v in views], dtype=np.int64)
    key = np.array([str(v[3]) for v in views])
    return _split("diginetica", user, slot, key)


def generated(
    slots: int = 12,
    users: int = 3000,
    keys: int = 5000,
    active: float = 0.8,
    zipf: float = 1.3,
    drift: int = 3,
    seed: int = 0,
) -> Events:
    """The generated ``gen-keys`` stream (see the module docstring)."""
    rng = np.random.default_rng(seed)
    user_l, slot_l, key_l = [], [], []
    for t in range(slots):
        on = np.flatnonzero(rng.random(users) < active)
        rank = np.minimum(rng.zipf(zipf, on.size) - 1, keys - 1)
        user_l.append(on)
        slot_l.append(np.full(on.size, t))
        key_l.append((rank + drift * t) % keys)
    key = np.concatenate(key_l)
    return _split(
        "gen-keys",
        np.concatenate(user_l).astype(np.int64),
        np.concatenate(slot_l).astype(np.int64),
        np.char.add("k", key.astype(str)),
    )


def bounded(slot: Slot, max_keys: int, rng: np.random.Generator) -> Slot:
    """``slot`` with each user's distinct keys cut to ``max_keys`` (a random subset)."""
    if slot.users.size == 0:
        return slot
    names, key_id = np.unique(slot.keys, return_inverse=True)
    pairs = np.unique(np.stack([slot.users, key_id.astype(np.int64)], axis=1), axis=0)
    pairs = pairs[rng.permutation(len(pairs))]
    pairs = pairs[np.argsort(pairs[:, 0], kind="stable")]
    starts = np.searchsorted(pairs[:, 0], pairs[:, 0], side="left")
    keep = np.arange(len(pairs)) - starts < max_keys
    return Slot(pairs[keep, 0], names[pairs[keep, 1]])


def truth(slot: Slot) -> dict[str, int]:
    """Distinct-user count per key of a (bounded) slot."""
    names, counts = np.unique(slot.keys, return_counts=True)
    return dict(zip((str(k) for k in names), (int(c) for c in counts), strict=True))


def domain(slots: Sequence[Slot]) -> npt.NDArray[np.str_]:
    """Every key any slot holds, sorted: the label set an oracle would declare in advance."""
    if not slots:
        return np.array([], dtype=str)
    return np.unique(np.concatenate([s.keys for s in slots]))


def load(name: str) -> Events:
    """A dataset by name: ``tdrive``, ``diginetica`` or ``gen-keys``."""
    loaders: dict[str, Callable[[], Events]] = {
        "tdrive": tdrive,
        "diginetica": diginetica,
        "gen-keys": generated,
    }
    if name not in loaders:
        raise ValueError(f"unknown open-domain dataset {name!r}; one of {sorted(loaders)}")
    return loaders[name]()


__all__ = ["Events", "Slot", "bounded", "domain", "generated", "load", "truth"]
