"""The population ledger of personalized local mechanisms: every user's own window.

:class:`~app.dp.local.population.Population` recycles every bucket after one common window.
Under personalized w-event LDP (PLDP-IDS Defs. 6-8) user ``i`` has its own ``(w_i, eps_i)`` and
reports with ``eps_i / s_i`` (``s_i`` shares, 1 unless OPS split its budget). Its constraint
(Def. 8, spec I1) is: at most ``s_i`` reports in any ``w_i`` consecutive slots.

:class:`PersonalPopulation` keeps both rules:

* the mechanism's recycling window ``W`` (spec §3.0: a user who reported at ``tau`` is available
  again at ``tau + W``), through the parent class's ages; :meth:`draw` only offers buckets
  that are available under it;
* each user's own window: :meth:`mark` refuses a bucket holding users of a level ``(w, eps)``
  with ``s`` shares if the bucket already reported ``s`` times in the last ``w - 1`` slots, so no
  user ever exceeds its own ``eps_i`` in a window of its own ``w_i``, whatever the mechanism
  computes (in particular with the paper's OPS split rule, spec A10).

Every user's level is an explicit input, :attr:`PersonalPopulation.assignment` (one byte per
user; :data:`~app.dp.local.wire.SITS_OUT` for a user who is not asked at all, as during the gap
after a level change). It starts in blocks (the first ``users[0]`` indices at level 0, ...), as
:class:`~app.dp.local.plbu.PLBU` assigns them and as offline runs use it; the service replaces it
with the levels users chose (:meth:`PersonalPopulation.assign`, from the ``preferences`` topic).
``users`` stays the *planned* mix (what OPS and ``err`` were chosen for); the per-bucket counts
follow the assignment. User ``i`` lives in bucket ``i mod buckets``, so a bucket may hold users
of several levels: all of them report together and every one of their constraints is checked.
The ledger keeps the last ``max(s)`` report slots of every bucket.

>>> import numpy as np
>>> from app.dp.types import Group
>>> pop = PersonalPopulation([4, 2], 6, window=2, levels=[Group(2, 1.0), Group(5, 1.0)],
...                          shares=[1, 2])
>>> pop.users_in_levels([0, 5]).tolist()
[1, 1]
>>> for t in (1, 3):
...     pop.mark(t, [5])
>>> pop.available_users(5)
6
>>> pop.mark(5, [5])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.dp.local.personal_population.PersonalWindowError: bucket 5 (level 1: w=5, 2 shares) ...
>>> pop.assign(np.array([1, 1, 0, 0, 255, 0], dtype=np.uint8))  # user 4 sits out
>>> pop.users_in_levels([0, 4, 5]).tolist(), pop.users_in([4])
([1, 1], 0)
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.errors import DPError, ParameterError, StateMismatchError
from app.dp.local.population import Population
from app.dp.local.wire import SITS_OUT
from app.dp.types import Group, IntArray

LevelArray = npt.NDArray[np.uint8]

NEVER = -(1 << 40)
"""The report slot recorded for 'no report yet'."""


class PersonalWindowError(DPError):
    """A round asked a bucket whose users would exceed their own ``eps_i`` in their ``w_i``.

    This never happens with a correct mechanism and a safe OPS split rule: it is the population
    ledger refusing to let a mechanism (or the paper's OPS split, spec A10) make a user report
    more than ``s_i`` times in a window of its own ``w_i`` slots. Nothing was sent. Report it
    with the numbers it carries.
    """

    def __init__(
        self, bucket: int, level: int, group: Group, shares: int, slots: list[int], slot: int
    ) -> None:
        self.bucket, self.level, self.slot = bucket, level, slot
        super().__init__(
            f"bucket {bucket} (level {level}: w={group.w}, {shares} shares) reported at slots "
            f"{slots} and was asked again at slot {slot}: that is more than {shares} reports in "
            f"{group.w} slots"
        )


def block_levels(users: Sequence[int]) -> LevelArray:
    """Every user's level when the levels come in index blocks of ``users[k]`` users."""
    return np.repeat(np.arange(len(users), dtype=np.uint8), np.asarray(users, dtype=np.int64))


def level_sizes(levels: LevelArray, m: int, buckets: int) -> IntArray:
    """``(m, buckets)``: how many users of each level each bucket holds (sitting out: none)."""
    user = np.flatnonzero(levels != SITS_OUT)
    flat = levels[user].astype(np.int64) * buckets + user % buckets
    out: IntArray = np.bincount(flat, minlength=m * buckets).reshape(m, buckets)
    return out


class PersonalPopulation(Population):
    """Buckets with a common recycling window and every level's own window; see the module."""

    def __init__(
        self,
        users: Sequence[int],
        buckets: int,
        window: int,
        levels: Sequence[Group],
        shares: Sequence[int],
    ) -> None:
        if not len(users) == len(levels) == len(shares) >= 1 or min(shares) < 1:
            raise ParameterError("users, levels and shares must have one entry per level")
        self.levels = tuple(levels)
        self.shares = tuple(int(s) for s in shares)
        self.depth = max(self.shares)
        super().__init__(int(sum(users)), buckets, window)
        self.assign(block_levels(users))

    def assign(self, levels: npt.ArrayLike) -> None:
        """Take every user's level for the slots to come (one entry per user, level indices or
        :data:`~app.dp.local.wire.SITS_OUT`); buckets then count only the users they hold now."""
        lv = np.asarray(levels)
        if lv.shape != (self.users,) or not np.issubdtype(lv.dtype, np.integer):
            raise ParameterError(f"levels must give one integer per user ({self.users})")
        bad = (lv != SITS_OUT) & ((lv < 0) | (lv >= len(self.levels)))
        if bad.any():
            raise ParameterError(
                f"user {int(np.flatnonzero(bad)[0])}: level must be in [0, {len(self.levels)}) "
                f"or {SITS_OUT} (sits out)"
            )
        self.assignment: LevelArray = lv.astype(np.uint8)
        self.level_sizes = level_sizes(self.assignment, len(self.levels), self.buckets)
        self.sizes = self.level_sizes.sum(axis=0)

    def level_use(self, t: int) -> tuple[IntArray, IntArray]:
        """Per level, ``(users at the level, those of them available at slot t)``; users
        sitting out a change are in neither (:meth:`sitting_out`)."""
        free = self.available(t)
        return self.level_totals(), self.level_sizes[:, free].sum(axis=1)

    def sitting_out(self) -> int:
        """Users at no level now: those sitting out a change of level."""
        return self.users - int(self.level_sizes.sum())

    def level_totals(self) -> IntArray:
        """Users at each level now, shape ``(m,)`` (those sitting out in none)."""
        out: IntArray = self.level_sizes.sum(axis=1)
        return out

    def _reset(self) -> None:
        super()._reset()
        self.history: IntArray = np.full((self.buckets, self.depth), NEVER, dtype=np.int64)
        """The last ``depth`` report slots of every bucket, most recent first."""

    def users_in_levels(self, cohort: npt.ArrayLike) -> IntArray:
        """How many users of each level the buckets ``cohort`` hold, shape ``(m,)``."""
        c = np.asarray(cohort, dtype=np.int64)
        out: IntArray = self.level_sizes[:, c].sum(axis=1)
        return out

    def mark(self, t: int, cohort: npt.ArrayLike | Sequence[int]) -> None:
        """Record that ``cohort`` reports at ``t``; refuse a bucket unavailable under ``W`` or
        under any of its levels' own windows (nothing is recorded then)."""
        c = np.asarray(cohort, dtype=np.int64)
        if c.size and (c.min() < 0 or c.max() >= self.buckets):
            raise ParameterError(f"cohort buckets must lie in [0, {self.buckets})")
        for k, (group, s) in enumerate(zip(self.levels, self.shares, strict=True)):
            held = c[self.level_sizes[k, c] > 0]
            # the s-th most recent report must have left this level's window [t - w + 1, t]
            busy = held[self.history[held, s - 1] > t - group.w]
            if busy.size:
                b = int(busy[0])
                raise PersonalWindowError(b, k, group, s, self.history[b, :s].tolist(), t)
        super().mark(t, c)
        self.history[c, 1:] = self.history[c, :-1]
        self.history[c, 0] = t

    def state_dict(self) -> dict[str, Any]:
        return {
            **super().state_dict(),
            "history": self.history.astype("<i8").tobytes(),
            "levels": zlib.compress(self.assignment.tobytes()),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        history = np.frombuffer(state["history"], dtype="<i8").astype(np.int64)
        if history.size != self.buckets * self.depth:
            raise StateMismatchError(
                f"population history has {history.size} entries, not {self.buckets * self.depth}"
            )
        super().load_state(state)
        self.history = history.reshape(self.buckets, self.depth).copy()
        if "levels" in state:  # a ledger written before levels came from preferences: blocks
            try:
                self.assign(np.frombuffer(zlib.decompress(state["levels"]), dtype=np.uint8))
            except (zlib.error, ParameterError) as exc:
                raise StateMismatchError(f"population levels: {exc}") from None
