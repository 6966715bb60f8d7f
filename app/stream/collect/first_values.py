"""One open slot's "one value per user": keyed 64-bit user digests in sorted numpy runs.

A one-value counting stream keeps, per open slot of a partition, the first value each user sent
in it (:mod:`app.stream.collect.events`). :class:`FirstValues` holds that as two parallel numpy
arrays per *run*, a sorted ``uint64`` digest of the user and the value (the smallest unsigned
type that holds ``d - 1``): 9 bytes per distinct user for ``d <= 256``, against ~80 for a
``dict`` of user strings, and a batch is merged with a few array operations instead of an entry
per event. Runs are kept in decreasing size, each at least :data:`RATIO` times the next, so a
slot of ``n`` users has at most ``log_RATIO(n) + 1`` of them and each digest is copied
``O(log n)`` times over the slot's life.

Digests: :func:`digests` is CPython's string hash, SipHash-1-3 under a 128-bit key the
interpreter draws from the OS at start-up and never shows, so the key is secret per process and
nobody can choose two user ids that collide. Where the key is not random (``PYTHONHASHSEED`` set
to a number, or a build without SipHash) a keyed BLAKE2b of the user's UTF-8 bytes is used, with
a key drawn by this module. A slot is built and closed by one process (after a restart the new
owner rebuilds it by replay, under its own key), so a user's digest never changes within a slot.

Collisions, and their direction: two distinct users of one slot and partition share a digest
with probability at most ``2**-63`` (SipHash's output, with the one value CPython remaps
doubling one point), so among ``n`` users of a slot any collision has probability at most
``n**2 / 2**64`` (``5.4e-6`` for ``n = 10**7``; one given user is affected with probability at
most ``n / 2**63``). A collision can only make the *later* of the two users look like a
duplicate: its value is dropped (counted ``duplicate``), never counted a second time, because a
user's own events always map to its one digest and the first value per digest is all a slot
keeps. The one other effect: at close, a user with a level history is found by digest, so a
colliding user without one would be counted in that user's group instead of the default (still
once), with probability at most ``h * n / 2**63`` per slot for ``h`` users with a history.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

RATIO = 4
"""Each run holds at least this many times the users of the next (newer) one."""

_SIPHASH = (
    sys.hash_info.algorithm.startswith("siphash")
    and sys.hash_info.hash_bits == 64
    and os.environ.get("PYTHONHASHSEED", "random") == "random"
)
_KEY = secrets.token_bytes(32)

Digests = npt.NDArray[np.uint64]


def digests(users: Sequence[str]) -> Digests:
    """The keyed 64-bit digest of each user (see the module docstring)."""
    if _SIPHASH:
        signed = np.fromiter(map(hash, users), dtype=np.int64, count=len(users))
        out: Digests = signed.view(np.uint64)
        return out
    # Only where the interpreter's hash key is not random.
    return np.fromiter((_blake(u) for u in users), dtype=np.uint64, count=len(users))


def _blake(user: str) -> int:
    raw = hashlib.blake2b(user.encode(), key=_KEY, digest_size=8).digest()
    return int.from_bytes(raw, "little")


class FirstValues:
    """The first value of each user in one open slot, by digest; see the module docstring."""

    __slots__ = ("_dtype", "_runs")

    def __init__(self, d: int) -> None:
        self._dtype = np.min_scalar_type(max(d - 1, 0))
        self._runs: list[tuple[Digests, npt.NDArray[Any]]] = []

    def __len__(self) -> int:
        return sum(int(r[0].shape[0]) for r in self._runs)

    def merge(self, users: Sequence[str], values: Sequence[int]) -> int:
        """Keep the first value of each of ``users`` (in order) not already in the slot;
        return how many users were new (the others' values are duplicates)."""
        if not users:
            return 0
        return self._merge(digests(users), np.asarray(values, dtype=self._dtype))

    def values(self) -> npt.NDArray[np.int64]:
        """Every user's value (in no particular order)."""
        parts = [v for _, v in self._runs]
        return np.concatenate([*parts, np.zeros(0, self._dtype)]).astype(np.int64)

    def find(self, users: Sequence[str]) -> list[int | None]:
        """The value each of ``users`` holds in the slot (None: none)."""
        hs = digests(users)
        found: list[int | None] = [None] * hs.shape[0]
        for run_h, run_v in self._runs:
            at = np.searchsorted(run_h, hs).clip(max=run_h.shape[0] - 1)
            for i in np.flatnonzero(run_h[at] == hs).tolist():
                found[i] = int(run_v[at[i]])
        return found

    def items(self) -> Iterator[tuple[int, int]]:
        """``(digest, value)`` pairs in digest order (for comparing two slots' states)."""
        if not self._runs:
            return iter(())
        h = np.concatenate([r[0] for r in self._runs])
        v = np.concatenate([r[1] for r in self._runs])
        order = np.argsort(h)
        return zip(h[order].tolist(), v[order].tolist(), strict=True)

    # -- internals ----------------------------------------------------------------------------
    def _merge(self, hs: Digests, vs: npt.NDArray[Any]) -> int:
        new, first = np.unique(hs, return_index=True)  # sorted; index of each first occurrence
        keep = np.ones(new.shape[0], dtype=bool)
        for run_h, _ in self._runs:
            at = np.searchsorted(run_h, new).clip(max=run_h.shape[0] - 1)
            keep &= run_h[at] != new
        added = int(keep.sum())
        if added:
            self._runs.append((new[keep], vs[first[keep]]))
            runs = self._runs
            while len(runs) >= 2 and runs[-2][0].shape[0] < RATIO * runs[-1][0].shape[0]:
                newer = runs.pop()
                runs.append(_merged(runs.pop(), newer))
        return added


def _merged(
    a: tuple[Digests, npt.NDArray[Any]], b: tuple[Digests, npt.NDArray[Any]]
) -> tuple[Digests, npt.NDArray[Any]]:
    """Two sorted runs with no digest in common, as one sorted run (linear, no sort)."""
    (ah, av), (bh, bv) = a, b
    at = np.searchsorted(ah, bh) + np.arange(bh.shape[0])
    from_a = np.ones(ah.shape[0] + bh.shape[0], dtype=bool)
    from_a[at] = False
    h = np.empty(from_a.shape[0], dtype=np.uint64)
    v = np.empty(from_a.shape[0], dtype=av.dtype)
    h[at], v[at] = bh, bv
    h[from_a], v[from_a] = ah, av
    return h, v
