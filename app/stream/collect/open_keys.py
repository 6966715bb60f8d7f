"""One open slot of an open-domain stream (``domain: open``): each user's kept keys.

The contribution bound of issue 36, at ingest: each user contributes at most ``max_keys``
distinct keys per slot, each once. The rule is :mod:`app.dp.open.bounding`'s keyed-hash order:
every distinct ``(user, key)`` pair gets the score ``mix(key_hash(key) + mix(user ^ salt))``
(:func:`app.dp.open.salt.scores`) and a user keeps its ``max_keys`` pairs of smallest score.
The salt is the slot's (:func:`app.dp.open.salt.slot_salt`: the deployment's noise key, the
stream and the slot), so every worker and every replay after a crash or a rebalance keeps the
same keys. **The keys a user keeps depend on that user's own events of the slot and the salt
only**: not on other users, arrival order, batching, partitioning, counts or anything released
(the argument: ``docs/open-domain.md``, "Contribution bounding"); that is what bounds one
user's effect on the slot's counts to ``max_keys`` keys.

Incremental and exact: "the ``max_keys`` smallest of a user's pairs" is the same whether taken
over all the pairs at once or over batches merged in any order (the smallest of a union is the
smallest of the parts' smallest), so a batch keeps only its own smallest per user and the
slot merges what the batches kept.

Storage (numpy, no Python object per event): the kept pairs are sorted *runs* of three
``uint64`` arrays (user digest, score, key digest), 24 bytes per pair, merged when a run grows
past a quarter of the one before (:data:`RATIO`, as :mod:`~app.stream.collect.first_values`
does), and the distinct keys kept so far are sorted runs of key digests with their strings (a
Python string per distinct key: the one Python object the slot holds per key, never per
event). Digests are CPython's keyed string hash (:func:`~app.stream.collect.first_values.
digests`: secret per process, so nobody can make two users or two keys collide on purpose);
two distinct keys of a slot share one with probability at most ``n**2 / 2**64`` and would then
count as one. The work per batch is numpy over its events, and Python over its distinct keys
and users only (their strings are hashed as numpy arrays).

A score tie within one user's keys (a ``2**-64`` event under the secret salt) is broken by the
key digest, which is per process: a replay could then keep the other key.

>>> slot = OpenKeys(max_keys=1, salt=5)
>>> slot.add(["ann", "ann", "ann", "bob"], ["a", "b", "a", "a"])  # accepted, duplicate, clipped
(2, 1, 1)
>>> users, index, keys = slot.close()  # ann keeps one of a, b; bob keeps a
>>> len(users), slot.dropped, "a" in keys, set(keys) <= {"a", "b"}
(2, True, True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from app.dp.open.bounding import key_hash
from app.dp.open.salt import scores, user_words
from app.stream.collect.first_values import Digests, digests

OUTCOMES = ("accepted", "duplicate", "clipped")
"""What :meth:`OpenKeys.add` counts, in the order it returns them."""
RATIO = 4
"""Each run holds at least this many times the pairs (or keys) of the next (newer) one."""

Pairs = tuple[Digests, Digests, Digests]
"""A run of kept pairs: user digests, scores, key digests, sorted by (user, score, key)."""
Strings = npt.NDArray[np.object_]
KeyRun = tuple[Digests, Strings]
"""A run of distinct keys: sorted digests and their strings."""


class OpenKeys:
    """The kept ``(user, key)`` pairs of one open slot; see the module docstring."""

    __slots__ = ("_key_runs", "_runs", "dropped", "max_keys", "salt")

    def __init__(self, max_keys: int, salt: int) -> None:
        self.max_keys = max_keys
        self.salt = salt
        self.dropped = False
        """Whether the bound dropped a pair of this slot (the operator's one-bit signal)."""
        self._runs: list[Pairs] = []
        self._key_runs: list[KeyRun] = []

    def __len__(self) -> int:
        """Kept pairs, counting a pair kept in two runs twice (an upper bound)."""
        return sum(int(r[0].shape[0]) for r in self._runs)

    def add(self, users: Sequence[str], keys: Sequence[str]) -> tuple[int, int, int]:
        """Take a batch's events of the slot (``users[i]`` sent ``keys[i]``); return how many
        were ``(accepted, duplicate, clipped)``: a distinct pair kept when it arrived, a repeat
        of a pair within the batch, a pair the bound dropped when it arrived."""
        n = len(users)
        if not n:
            return 0, 0, 0
        ud, kd = digests(users), digests(keys)
        order = np.lexsort((kd, ud))
        us, ks = ud[order], kd[order]
        first = np.ones(n, dtype=bool)
        first[1:] = (us[1:] != us[:-1]) | (ks[1:] != ks[:-1])
        at = order[first]  # one event per distinct pair
        pu, pk = ud[at], kd[at]
        batch_keys, key_at, key_of = np.unique(pk, return_index=True, return_inverse=True)
        strings = _strings([keys[i] for i in at[key_at].tolist()])
        _, user_at, user_of = np.unique(pu, return_index=True, return_inverse=True)
        words = user_words([users[i] for i in at[user_at].tolist()])
        score = scores(key_hash(strings.astype(np.str_))[key_of], words[user_of.ravel()], self.salt)
        run, clipped = _smallest((pu, score, pk), self.max_keys)
        self._keep_strings(run[2], batch_keys, strings)
        self._push(run)
        if clipped:
            self.dropped = True
        return int(at.shape[0]) - clipped, n - int(at.shape[0]), clipped

    def close(self) -> tuple[Digests, npt.NDArray[np.int64], Strings]:
        """The slot's kept pairs: the user digest of each, the index of its key in the keys,
        and the distinct kept keys sorted (as strings)."""
        users, _, keys = self._compact()
        distinct, index = np.unique(keys, return_inverse=True)
        table_h, table_s = self._key_table()
        strings = table_s[np.searchsorted(table_h, distinct)] if distinct.size else _strings([])
        order = np.argsort(strings, kind="stable")  # Python comparisons, once per key
        rank = np.empty(order.shape[0], dtype=np.int64)
        rank[order] = np.arange(order.shape[0])
        return users, rank[index.ravel()], strings[order]

    def items(self) -> list[tuple[int, str]]:
        """The kept ``(user digest, key)`` pairs, sorted (for comparing two slots' states;
        the runs are left as they are)."""
        if not self._runs:
            return []
        merged = self._runs[0]
        for run in self._runs[1:]:
            merged = _smallest(_concat(merged, run), self.max_keys)[0]
        table_h, table_s = self._key_table()
        keys = table_s[np.searchsorted(table_h, merged[2])].tolist()
        return sorted(zip(merged[0].tolist(), keys, strict=True))

    # -- internals ----------------------------------------------------------------------------
    def _push(self, run: Pairs) -> None:
        runs = self._runs
        runs.append(run)
        while len(runs) >= 2 and runs[-2][0].shape[0] < RATIO * runs[-1][0].shape[0]:
            newer = runs.pop()
            merged, clipped = _smallest(_concat(runs.pop(), newer), self.max_keys)
            self.dropped = self.dropped or clipped > 0
            runs.append(merged)

    def _compact(self) -> Pairs:
        if not self._runs:
            empty = np.zeros(0, dtype=np.uint64)
            return empty, empty, empty
        while len(self._runs) > 1:
            newer = self._runs.pop()
            merged, clipped = _smallest(_concat(self._runs.pop(), newer), self.max_keys)
            self.dropped = self.dropped or clipped > 0
            self._runs.append(merged)
        return self._runs[0]

    def _keep_strings(self, kept: Digests, batch_keys: Digests, strings: Strings) -> None:
        """Remember the strings of the kept keys the slot does not hold yet."""
        want = np.unique(kept)
        for run_h, _ in self._key_runs:
            at = np.searchsorted(run_h, want).clip(max=run_h.shape[0] - 1)
            want = want[run_h[at] != want]
        if not want.size:
            return
        self._key_runs.append((want, strings[np.searchsorted(batch_keys, want)]))
        runs = self._key_runs
        while len(runs) >= 2 and runs[-2][0].shape[0] < RATIO * runs[-1][0].shape[0]:
            (bh, bs), (ah, as_) = runs.pop(), runs.pop()
            h = np.concatenate([ah, bh])
            order = np.argsort(h, kind="stable")
            runs.append((h[order], np.concatenate([as_, bs])[order]))

    def _key_table(self) -> KeyRun:
        if not self._key_runs:
            return np.zeros(0, dtype=np.uint64), _strings([])
        h = np.concatenate([r[0] for r in self._key_runs])
        s = np.concatenate([r[1] for r in self._key_runs])
        order = np.argsort(h, kind="stable")
        return h[order], s[order]


def _strings(items: list[str]) -> Strings:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def _concat(a: Pairs, b: Pairs) -> Pairs:
    users, score, keys = (np.concatenate([x, y]) for x, y in zip(a, b, strict=True))
    return users, score, keys


def _smallest(pairs: Pairs, max_keys: int) -> tuple[Pairs, int]:
    """Per user, the ``max_keys`` distinct pairs of smallest score (ties by key digest), sorted
    by (user, score, key); and how many distinct pairs were dropped. A pair present twice
    (kept by two batches) counts once."""
    users, score, keys = pairs
    order = np.lexsort((keys, score, users))
    users, score, keys = users[order], score[order], keys[order]
    n = users.shape[0]
    new = np.ones(n, dtype=bool)
    new[1:] = (users[1:] != users[:-1]) | (keys[1:] != keys[:-1]) | (score[1:] != score[:-1])
    users, score, keys = users[new], score[new], keys[new]
    starts = np.ones(users.shape[0], dtype=bool)
    starts[1:] = users[1:] != users[:-1]
    position = np.arange(users.shape[0])
    rank = position - np.maximum.accumulate(np.where(starts, position, 0))
    kept = rank < max_keys
    return (users[kept], score[kept], keys[kept]), int((~kept).sum())
