"""Contribution bounding: each user keeps at most ``max_keys`` distinct keys per slot, once each.

Rule: a **keyed-hash order per user and slot**. Every distinct ``(user, key)`` pair of the slot
gets the score ``mix(hash(key) + mix(user ^ salt))``, where ``salt`` is a 64-bit word drawn from
the slot's generator (secret: the service keys that generator with HMAC, :func:`app.dp.noise.
keyed_rng`) and ``mix`` is the SplitMix64 finalizer; a user keeps its ``max_keys`` keys of
smallest score (ties by key). Why this rule:

* **Stability (the privacy argument needs only this).** A user's kept keys are a function of that
  user's own events of the slot and the salt, nothing else: adding, removing or replacing one
  user changes the kept pairs of that user only, so the bounded count vector moves by at most
  ``max_keys`` in L1 (``2 max_keys`` under replace), the sensitivity the noise is calibrated to.
* **Nothing an adversary learns from the release steers it.** The order does not look at the
  public keys, earlier releases, other users, counts or arrival order; the salt is fresh each
  slot and never published. A rule preferring already-public keys would be DP too (the public
  set is post-processing), but it would bias which of a user's keys survive towards what the
  release already shows, and an adversary who sees releases could predict (and, sending keys
  of its own, steer) which keys of a victim are counted. A secret per-slot order makes the kept
  subset a uniform sample of the user's keys that nobody outside can predict.
* **Reproducible.** First-seen by arrival depends on partitioning and redelivery (a slot
  recomputed after a crash could keep other keys, and ``replay`` would differ from the worker);
  first-seen by event time lets a sender choose which keys count and ties are common. The
  keyed hash gives the same kept set for the same events and the same slot generator, in any
  order.

Everything is numpy over the slot's events and distinct keys; the only Python loop runs over
the characters of the longest key (bounded by ``max_key_chars``).

>>> import numpy as np
>>> users = np.array([7, 7, 7, 8, 7])
>>> keys = np.array(["a", "b", "c", "a", "a"])
>>> b = bound(users, keys, max_keys=1, salt=5)
>>> int(b.counts.sum()), b.dropped  # user 7 keeps one of a, b, c (2 dropped); 8 keeps a
(2, 2)
>>> set(b.keys.tolist()) <= {"a", "b", "c"} and "a" in b.keys
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.types import IntArray

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix(z: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """SplitMix64's finalizer, elementwise (uint64, wrapping)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        out: npt.NDArray[np.uint64] = z ^ (z >> np.uint64(31))
    return out


def key_hash(keys: npt.NDArray[np.str_]) -> npt.NDArray[np.uint64]:
    """A 64-bit hash of each key string, over its code points (numpy, a loop over columns)."""
    fixed = np.asarray(keys, dtype=np.str_)
    width = max(fixed.dtype.itemsize // 4, 1)
    points = fixed.view(np.uint32).reshape(fixed.size, width).astype(np.uint64)
    h = np.full(fixed.size, _GOLDEN, dtype=np.uint64)
    for j in range(width):
        with np.errstate(over="ignore"):
            h = mix(h + points[:, j] + _GOLDEN)
    return h


@dataclass(frozen=True)
class Bounded:
    """A slot's events after bounding: the distinct keys (sorted) and their user counts."""

    keys: npt.NDArray[np.str_]
    """Distinct keys that some user kept, sorted."""
    counts: IntArray
    """Users who kept each key (each >= 1)."""
    dropped: int
    """Distinct (user, key) pairs dropped by the bound (duplicates of a pair are not counted):
    a figure about the data, for an operator's coarse signal only, never exported exactly."""


def bound(
    users: npt.ArrayLike, keys: npt.ArrayLike, max_keys: int, salt: int, max_key_chars: int = 256
) -> Bounded:
    """Apply the bound to one slot's events (``users[i]`` sent ``keys[i]``); inputs unchanged."""
    distinct, _, index, dropped = kept_pairs(users, keys, max_keys, salt, max_key_chars)
    counts = np.bincount(index, minlength=distinct.size).astype(np.int64)
    present = counts > 0
    return Bounded(distinct[present], counts[present], dropped)


def kept_pairs(
    users: npt.ArrayLike, keys: npt.ArrayLike, max_keys: int, salt: int, max_key_chars: int = 256
) -> tuple[npt.NDArray[np.str_], IntArray, IntArray, int]:
    """The slot's distinct keys (sorted), the kept ``(user, key index)`` pairs, and how many
    distinct pairs were dropped."""
    u = np.asarray(users, dtype=np.int64).ravel()
    k = np.asarray(keys, dtype=np.str_).ravel()
    if u.shape != k.shape:
        raise ParameterError(f"users and keys must align, got {u.size} and {k.size} entries")
    if k.size and int(np.char.str_len(k).max()) > max_key_chars:
        raise ParameterError(f"keys must have at most max_key_chars={max_key_chars} characters")
    distinct, index = np.unique(k, return_inverse=True)
    index = index.ravel().astype(np.int64)
    # each (user, key) once
    order = np.lexsort((index, u))
    u, index = u[order], index[order]
    first = np.ones(u.size, dtype=bool)
    first[1:] = (u[1:] != u[:-1]) | (index[1:] != index[:-1])
    u, index = u[first], index[first]
    # keyed order within each user: the max_keys smallest scores survive
    salt_word = np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        score = mix(key_hash(distinct)[index] + mix(u.astype(np.uint64) ^ salt_word))
    order = np.lexsort((index, score, u))
    u, index = u[order], index[order]
    starts = np.ones(u.size, dtype=bool)
    starts[1:] = u[1:] != u[:-1]
    position = np.arange(u.size)
    rank = position - np.maximum.accumulate(np.where(starts, position, 0))
    kept = rank < max_keys
    return distinct, u[kept], index[kept], int((~kept).sum())
