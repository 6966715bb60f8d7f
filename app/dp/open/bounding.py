"""Contribution bounding: each user keeps at most ``max_keys`` distinct keys per slot, once each.

Rule: a **keyed-hash order per user and slot**. Every distinct ``(user, key)`` pair of the slot
gets the score ``mix(hash(key) + mix(user ^ salt))``, where ``salt`` is a 64-bit word drawn from
the slot's generator (secret: the service keys that generator with HMAC, :func:`app.dp.noise.
keyed_rng`) and ``mix`` is the SplitMix64 finalizer; a user keeps its ``max_keys`` keys of
smallest score (ties, a 2**-64 event, by the key's hash, then the key). Why this rule:

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
    """A 64-bit hash of each key string, over its code points and its length only (the array's
    padding to its longest key never enters: a key hashes alike in any slot), numpy with a
    loop over columns."""
    fixed = np.ascontiguousarray(keys, dtype=np.str_)
    width = max(fixed.dtype.itemsize // 4, 1)
    points = fixed.view(np.uint32).reshape(fixed.size, width)
    lengths = np.char.str_len(fixed).astype(np.uint64)
    h = np.full(fixed.size, _GOLDEN, dtype=np.uint64)
    for j in range(width):
        with np.errstate(over="ignore"):
            h = np.where(lengths > j, mix(h + points[:, j].astype(np.uint64) + _GOLDEN), h)
    return mix(h ^ lengths)


def distinct_keys(
    keys: npt.NDArray[np.str_],
) -> tuple[npt.NDArray[np.str_], IntArray, npt.NDArray[np.uint64]]:
    """The distinct keys ordered by (hash, string), each event's index into them, and their
    hashes: the order depends on the keys alone, never on which other keys the slot holds.

    Grouping by the 64-bit hash avoids sorting strings (seconds for a million keys); the
    grouping is then checked exactly on the code points (every key equals its group's first),
    and a collision, about ``n**2 / 2**65`` likely, falls back to grouping the strings."""
    fixed = np.ascontiguousarray(keys, dtype=np.str_)
    width = max(fixed.dtype.itemsize // 4, 1)
    rows = fixed.view(np.uint32).reshape(fixed.size, width)  # row takes: fast, unlike strings
    hashes, first, index = np.unique(key_hash(fixed), return_index=True, return_inverse=True)
    index = index.ravel().astype(np.int64)
    distinct_rows = rows[first]
    if _grouped_alike(distinct_rows, index, rows):
        return distinct_rows.view(fixed.dtype).ravel(), index, hashes
    distinct, index = np.unique(fixed, return_inverse=True)  # two keys share a hash
    hashes = key_hash(distinct)
    by_hash = np.argsort(hashes, kind="stable")  # the same (hash, string) order as above
    place = np.empty(by_hash.size, dtype=np.int64)
    place[by_hash] = np.arange(by_hash.size)
    return distinct[by_hash], place[index.ravel()], hashes[by_hash]


_CHECK_ROWS = 1 << 14
"""Rows compared at once by :func:`_grouped_alike` (a block, never a copy of every key)."""


def _grouped_alike(
    distinct: npt.NDArray[np.uint32], index: IntArray, rows: npt.NDArray[np.uint32]
) -> bool:
    """Whether every row equals its group's first (``distinct[index] == rows``), block by
    block: a slot's keys are not copied again (4 bytes per character of the longest key)."""
    for lo in range(0, rows.shape[0], _CHECK_ROWS):
        hi = lo + _CHECK_ROWS
        if not np.array_equal(distinct[index[lo:hi]], rows[lo:hi]):
            return False
    return True


@dataclass(frozen=True)
class Bounded:
    """A slot's events after bounding: the distinct keys (sorted) and their user counts."""

    keys: npt.NDArray[np.str_]
    """Distinct keys that some user kept (in hash order, not sorted: sorting a million strings
    takes seconds; the release sorts only what it shows)."""
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
    """The slot's distinct keys (:func:`distinct_keys`), the kept ``(user, key index)`` pairs,
    and how many distinct pairs were dropped."""
    u = np.asarray(users, dtype=np.int64).ravel()
    k = np.asarray(keys, dtype=np.str_).ravel()
    if u.shape != k.shape:
        raise ParameterError(f"users and keys must align, got {u.size} and {k.size} entries")
    if k.size and int(np.char.str_len(k).max()) > max_key_chars:
        raise ParameterError(f"keys must have at most max_key_chars={max_key_chars} characters")
    distinct, index, hashes = distinct_keys(k)
    users_of, user = np.unique(u, return_inverse=True)
    user = user.ravel().astype(np.int64)
    # each (user, key) once: one integer per pair (users x keys < 2**63 for < 3e9 events)
    pairs = np.sort(user * distinct.size + index)  # a sort: np.unique's hash path is slower
    pairs = pairs[np.concatenate([[True], pairs[1:] != pairs[:-1]])] if pairs.size else pairs
    user, index = pairs // distinct.size, pairs % distinct.size
    # the keyed order: within each user, ascending score (ties by key index: hash, string)
    salt_word = np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        score = mix(hashes[index] + mix(users_of[user].astype(np.uint64) ^ salt_word))
    # two stable sorts, by score then by user (a lexsort, faster); never a data-dependent
    # truncation of the score, which would let the number of users reorder a user's keys
    by_score = np.argsort(score, kind="stable")
    order = by_score[np.argsort(user[by_score], kind="stable")]
    user, index = user[order], index[order]
    starts = np.ones(user.size, dtype=bool)
    starts[1:] = user[1:] != user[:-1]
    position = np.arange(user.size)
    rank = position - np.maximum.accumulate(np.where(starts, position, 0))
    kept = rank < max_keys
    return distinct, users_of[user[kept]], index[kept], int((~kept).sum())


def merge_counts(
    keys: npt.ArrayLike, counts: npt.ArrayLike, max_key_chars: int = 256
) -> tuple[npt.NDArray[np.str_], IntArray]:
    """Bounded per-key counts (``counts[i]`` users kept ``keys[i]``; a key may repeat, e.g. one
    partial per partition) summed per distinct key, in the canonical (hash, string) order of
    :func:`distinct_keys`; keys whose total is 0 are left out. Inputs unchanged.

    The order is that of :func:`bound`'s output, so merging what :func:`bound` returned gives
    it back unchanged, and it never depends on the order the counts came in:

    >>> b = bound(np.array([1, 2, 3]), np.array(["x", "y", "x"]), max_keys=1, salt=0)
    >>> keys, totals = merge_counts(b.keys, b.counts)
    >>> keys.tolist() == b.keys.tolist() and totals.tolist() == b.counts.tolist()
    True
    >>> merge_counts(["y", "x", "y", "z"], [1, 2, 3, 0])[1].tolist() == [
    ...     {"x": 2, "y": 4}[k] for k in merge_counts(["x", "y"], [1, 1])[0].tolist()]
    True
    """
    k = np.asarray(keys, dtype=np.str_).ravel()
    c = np.asarray(counts).ravel()
    if k.shape != c.shape:
        raise ParameterError(f"keys and counts must align, got {k.size} and {c.size} entries")
    if c.size and (c.dtype.kind not in "iu" or int(c.min()) < 0):
        raise ParameterError("counts must be non-negative integers (users who kept each key)")
    if k.size and int(np.char.str_len(k).max()) > max_key_chars:
        raise ParameterError(f"keys must have at most max_key_chars={max_key_chars} characters")
    distinct, index, _ = distinct_keys(k)
    totals = np.zeros(distinct.size, dtype=np.int64)
    np.add.at(totals, index, c.astype(np.int64))
    present = totals > 0
    if present.all():  # the service's partials hold no zero: no copy of the keys
        return distinct, totals
    return distinct[present], totals[present]
