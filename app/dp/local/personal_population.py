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

Users are assigned to levels in blocks (the first ``users[0]`` indices to level 0, ...), as
:class:`~app.dp.local.plbu.PLBU` does; user ``i`` lives in bucket ``i mod buckets``, so a bucket
may hold users of several levels: all of them report together and every one of their
constraints is checked. The ledger keeps the last ``max(s)`` report slots of every bucket.

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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.errors import DPError, ParameterError, StateMismatchError
from app.dp.local.population import Population
from app.dp.types import Group, IntArray

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


def level_sizes(users: Sequence[int], buckets: int) -> IntArray:
    """``(m, buckets)``: how many users of each level each bucket holds (block assignment)."""
    bounds = np.concatenate([[0], np.cumsum(np.asarray(users, dtype=np.int64))])
    b = np.arange(buckets, dtype=np.int64)
    below = (bounds[:, None] - b[None, :] + buckets - 1) // buckets  # indices < x in bucket b
    out: IntArray = np.diff(below, axis=0)
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
        self.level_sizes = level_sizes(users, buckets)

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
        return {**super().state_dict(), "history": self.history.astype("<i8").tobytes()}

    def load_state(self, state: dict[str, Any]) -> None:
        history = np.frombuffer(state["history"], dtype="<i8").astype(np.int64)
        if history.size != self.buckets * self.depth:
            raise StateMismatchError(
                f"population history has {history.size} entries, not {self.buckets * self.depth}"
            )
        super().load_state(state)
        self.history = history.reshape(self.buckets, self.depth).copy()
