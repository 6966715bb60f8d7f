"""The population ledger of local mode: which users may report, as whole buckets.

Registration gives every user a dense index ``i`` in ``[0, users)`` (the service's business,
public and independent of any value); user ``i`` lives in bucket ``i mod buckets``. Buckets
are the unit of everything local mode does with users:

* a cohort (the users asked in one round) is a set of buckets, so a collection request carries
  a bitmap of ``buckets`` bits, never a user list: 8 KiB for the default ``2**16`` buckets,
  whatever the number of users, and at most 32 KiB (:data:`MAX_BUCKETS`);
* a device decides membership from its index and the bitmap alone (:func:`bucket_of`);
* all users of a bucket report together, so the ledger keeps one last-report slot per bucket
  and is exact per user; planning a round costs ``O(buckets)``, not ``O(users)``.

A bucket that reported at slot ``s`` is unavailable at slots ``s + 1 .. s + w - 1`` and
available again from ``s + w`` on (LDP-IDS Alg. 3 l.16-17: the users of slot ``t - w + 1`` are
recycled at the end of slot ``t``). :meth:`Population.mark` refuses a bucket that is not
available, so no user is ever asked twice in a window of ``w`` slots, whatever a mechanism
computes. Bucket sizes differ by at most one user.

>>> import numpy as np
>>> pop = Population(users=10, buckets=5, w=3)
>>> pop.sizes.tolist()
[2, 2, 2, 2, 2]
>>> cohort = pop.draw(1, 5, np.random.default_rng(0))
>>> cohort.tolist(), pop.users_in(cohort)
([2, 4], 4)
>>> pop.mark(1, cohort)
>>> pop.available_users(2), pop.available_users(3)
(6, 6)
>>> pop.mark(3, [4])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.dp.local.population.CohortUnavailableError: bucket 4 reported at slot 1, asked again at ...
>>> pop.available_users(4)
10
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.errors import DPError, ParameterError, StateMismatchError
from app.dp.types import IntArray

MAX_BUCKETS = 1 << 18
"""At most this many buckets, so a cohort bitmap stays at 32 KiB."""

DEFAULT_BUCKETS = 1 << 16
"""Buckets used when a mechanism is not told (or fewer, if there are fewer users)."""


class CohortUnavailableError(DPError):
    """A round asked a bucket whose users already reported within their window.

    This never happens with a correct mechanism: it is the population ledger refusing to let a
    bug ask a user twice in ``w`` slots. Nothing was sent. Report it with the numbers it carries.
    """

    def __init__(self, bucket: int, last: int, slot: int, w: int) -> None:
        self.bucket, self.last, self.slot, self.w = bucket, last, slot, w
        super().__init__(
            f"bucket {bucket} reported at slot {last}, asked again at slot {slot} (w={w}): "
            f"its users are available from slot {last + w}"
        )


def bucket_of(user: int, buckets: int) -> int:
    """The bucket of the user registered with index ``user``."""
    return user % buckets


def default_buckets(users: int) -> int:
    """``min(users, DEFAULT_BUCKETS)``: one user per bucket for small populations."""
    return min(users, DEFAULT_BUCKETS)


def bitmap(buckets: int, cohort: npt.ArrayLike) -> bytes:
    """The cohort as ``ceil(buckets / 8)`` bytes, bit ``b % 8`` of byte ``b // 8`` for bucket b.

    >>> bitmap(10, [0, 9]).hex()
    '0102'
    """
    mask = np.zeros(buckets, dtype=bool)
    mask[np.asarray(cohort, dtype=np.int64)] = True
    return np.packbits(mask, bitorder="little").tobytes()


def in_bitmap(bits: bytes, bucket: int) -> bool:
    """Whether ``bucket`` is set in a cohort bitmap."""
    byte = bucket >> 3
    return byte < len(bits) and bool(bits[byte] >> (bucket & 7) & 1)


def from_bitmap(bits: bytes, buckets: int) -> IntArray:
    """The sorted bucket indices set in a cohort bitmap."""
    mask = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")[:buckets]
    return np.flatnonzero(mask).astype(np.int64)


class Population:
    """Users in buckets, with the slot each bucket last reported; see the module docstring."""

    def __init__(self, users: int, buckets: int, w: int) -> None:
        if users < 1 or not 1 <= buckets <= min(users, MAX_BUCKETS) or w < 1:
            raise ParameterError(
                f"buckets must be in [1, min(users, {MAX_BUCKETS})], got {buckets} "
                f"for users={users}"
            )
        self.users, self.buckets, self.w = users, buckets, w
        self.sizes: IntArray = np.full(buckets, users // buckets, dtype=np.int64)
        self.sizes[: users % buckets] += 1
        self._reset()

    def _reset(self) -> None:
        self.age: IntArray = np.full(self.buckets, self.w, dtype=np.int64)
        """Slots since each bucket last reported, capped at ``w`` (``w``: available)."""
        self.t = 0

    def advance(self, t: int) -> None:
        """Move the ledger's clock to slot ``t`` (slots only go forward)."""
        if t < self.t:
            raise ParameterError(f"slot must not go back, got {t} after {self.t}")
        np.minimum(self.age + (t - self.t), self.w, out=self.age)
        self.t = t

    def available(self, t: int) -> npt.NDArray[np.bool_]:
        """Mask of the buckets whose users may report at slot ``t``."""
        self.advance(t)
        return self.age >= self.w

    def available_users(self, t: int) -> int:
        """How many users may report at slot ``t``."""
        return int(self.sizes[self.available(t)].sum())

    def users_in(self, cohort: npt.ArrayLike) -> int:
        """How many users the buckets ``cohort`` hold."""
        return int(self.sizes[np.asarray(cohort, dtype=np.int64)].sum())

    def draw(self, t: int, target: int, rng: np.random.Generator) -> IntArray:
        """Uniformly random available buckets holding at most ``target`` users, sorted.

        The available buckets are shuffled and the longest prefix within ``target`` is taken,
        so the cohort holds ``target`` users up to one bucket's size when enough are available.
        """
        free = np.flatnonzero(self.available(t))
        order = rng.permutation(free)
        taken = int(np.searchsorted(np.cumsum(self.sizes[order]), max(target, 0), side="right"))
        return np.sort(order[:taken]).astype(np.int64)

    def mark(self, t: int, cohort: npt.ArrayLike | Sequence[int]) -> None:
        """Record that the buckets ``cohort`` report at slot ``t``; refuse any unavailable one."""
        c = np.asarray(cohort, dtype=np.int64)
        free = self.available(t)
        if c.size and (c.min() < 0 or c.max() >= self.buckets):
            raise ParameterError(f"cohort buckets must lie in [0, {self.buckets})")
        busy = c[~free[c]]
        if busy.size:
            b = int(busy[0])
            raise CohortUnavailableError(b, t - int(self.age[b]), t, self.w)
        self.age[c] = 0

    def state_dict(self) -> dict[str, Any]:
        return {"t": self.t, "age": self.age.astype("<i4").tobytes()}

    def load_state(self, state: dict[str, Any]) -> None:
        age = np.frombuffer(state["age"], dtype="<i4").astype(np.int64)
        if age.shape != (self.buckets,):
            raise StateMismatchError(
                f"population state has {age.shape[0]} buckets, not {self.buckets}"
            )
        self.age = age.copy()
        self.t = int(state["t"])
