"""The collect stage's state machine: slots, one value per user per slot, counts per group.

:class:`Collector` is pure bookkeeping (no Kafka, no clock of its own), so ``tests/stream``
drives it directly; :mod:`app.stream.ingest` feeds it batches from Kafka and ships what
:meth:`Collector.flush` returns.

Per events partition it keeps the *open* slots: for each ``(stream, slot)`` a dict
``user -> group * d + value`` (the first value a user sent in the slot; later ones are
``duplicate``) and the smallest offset that fed it. A slot closes when its end plus the
stream's grace has passed on the stream's clock (wall time, or the largest event time seen for
``clock: event``); closing turns the dict into a ``groups x d`` count matrix with one
``bincount``. Events of a slot the partition already closed are ``late`` and dropped.

Offsets: :meth:`Collector.commit_offset` is the smallest offset still feeding an open slot of
the partition, so committing it and replaying from it after a crash rebuilds exactly the open
slots (events of closed slots met during the replay are re-emitted as partials the release
agent ignores, because it keeps the first partial per slot and partition).

Preferences: a user's requirement level comes from the ``preferences`` table; a user without
one is in the stream's default (strictest) level. After a change at time ``ts``, the user's
events in slots ``[slot(ts), slot(ts) + max(w_old, w_new))`` are not counted (``level_change``),
so no window of either level mixes the two ledgers; before ``slot(ts)`` the old level applies.
Only the latest change per user is kept.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from app.stream.config import StreamConfig
from app.stream.errors import BadEvent
from app.stream.records import Domain, decode_event

MAX_EMPTY_GAP = 1000
"""At most this many consecutive empty partials are emitted for a partition at once."""
MAX_FUTURE_S = 60.0
"""With ``clock: wall``, events more than this (or two slots) ahead of now are ``bad_time``."""


@dataclass(frozen=True)
class Preference:
    """A user's chosen level name, when it was chosen, and the level before ("" = default)."""

    level: str
    since: float
    previous: str


@dataclass
class PartitionSlots:
    """Open slots of one events partition."""

    buckets: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    min_offset: dict[tuple[str, int], int] = field(default_factory=dict)
    closed_through: dict[str, int] = field(default_factory=dict)
    caught_up: bool = False


@dataclass(frozen=True)
class Partial:
    """One partition's counts (``groups x d``, row-major) for one closed slot."""

    stream: str
    slot: int
    partition: int
    counts: list[int]


class Collector:
    """Aggregates events per partition and slot; see the module docstring."""

    def __init__(self, streams: Iterable[StreamConfig]) -> None:
        self.streams = {s.id: s for s in streams}
        self.domains = {sid: Domain.of(s) for sid, s in self.streams.items()}
        self.partitions: dict[int, PartitionSlots] = {}
        self.preferences: dict[str, Preference] = {}
        self.watermark: float | None = None
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self._slot_s = {sid: s.slot_s for sid, s in self.streams.items()}

    # -- partitions ---------------------------------------------------------------------------
    def assign(self, partition: int) -> None:
        self.partitions[partition] = PartitionSlots()

    def revoke(self, partition: int) -> None:
        """Forget a partition's open slots: its next owner replays them from the commit."""
        self.partitions.pop(partition, None)

    # -- preferences --------------------------------------------------------------------------
    def set_preference(self, user: str, level: str | None, ts: float = 0.0) -> None:
        """Apply one ``preferences`` record (``level=None`` deletes the user's choice)."""
        old = self.preferences.get(user)
        if level is None:
            self.preferences.pop(user, None)
        elif old is None or old.level != level:
            self.preferences[user] = Preference(level, ts, old.level if old else "")

    def _group(self, stream: StreamConfig, user: str, slot: int) -> int | None:
        pref = self.preferences.get(user)
        if pref is None:
            return stream.default_level
        new = stream.level_index(pref.level)
        new = stream.default_level if new is None else new
        prev = stream.level_index(pref.previous) if pref.previous else None
        prev = stream.default_level if prev is None else prev
        if prev == new:
            return new
        start = math.floor(pref.since / stream.slot_s)
        if slot < start:
            return prev
        if slot < start + max(stream.levels[prev].w, stream.levels[new].w):
            return None
        return new

    # -- events -------------------------------------------------------------------------------
    def add(
        self, partition: int, offset: int, key: bytes | None, raw: bytes | None, wall_now: float
    ) -> None:
        """Count one ``events`` record; :class:`BadEvent` for an unusable one.

        The record's key must be its user: "one value per user per slot" is enforced per
        partition, so it bounds a user's contribution only if all of the user's events land in
        one partition. An event keyed otherwise could be counted once per partition.
        """
        sid, user, ts, value = decode_event(raw, self.domains)
        if key != user.encode():
            raise BadEvent("key_mismatch", "the message key must be the event's user")
        stream = self.streams[sid]
        if stream.clock == "wall":
            if ts > wall_now + max(MAX_FUTURE_S, 2 * stream.slot_s):
                raise BadEvent("bad_time", f"ts {ts} is in the future")
        elif self.watermark is None or ts > self.watermark:
            self.watermark = ts
        slot = int(ts // self._slot_s[sid])
        part = self.partitions[partition]
        closed = part.closed_through.get(sid)
        if closed is not None and slot <= closed:
            self.outcomes[sid, "late"] += 1
            return
        group = self._group(stream, user, slot)
        if group is None:
            self.outcomes[sid, "level_change"] += 1
            return
        open_slot = (sid, slot)
        bucket = part.buckets.get(open_slot)
        if bucket is None:
            bucket = part.buckets[open_slot] = {}
            part.min_offset[open_slot] = offset
        if user in bucket:
            self.outcomes[sid, "duplicate"] += 1
            return
        bucket[user] = group * stream.d + value
        self.outcomes[sid, "accepted"] += 1

    # -- closing ------------------------------------------------------------------------------
    def clock(self, stream: StreamConfig, wall_now: float) -> float | None:
        """The stream's current time: wall time, or the event-time watermark."""
        return wall_now if stream.clock == "wall" else self.watermark

    @staticmethod
    def last_closable(stream: StreamConfig, now: float) -> int:
        """The last slot whose end plus grace is at or before ``now``."""
        return math.floor((now - stream.grace_s) / stream.slot_s) - 1

    def _counts(self, stream: StreamConfig, bucket: dict[str, int] | None) -> list[int]:
        size = len(stream.levels) * stream.d
        if not bucket:
            return [0] * size
        codes = np.fromiter(bucket.values(), dtype=np.int64, count=len(bucket))
        return [int(x) for x in np.bincount(codes, minlength=size)]

    def flush(self, wall_now: float) -> list[Partial]:
        """Close every slot that is due in every caught-up partition; return their partials.

        A partition that has just been assigned emits its replayed open slots and then only the
        current last closable slot (earlier slots were closed by its previous owner).
        """
        out: list[Partial] = []
        for sid, stream in self.streams.items():
            now = self.clock(stream, wall_now)
            if now is None:
                continue
            top = self.last_closable(stream, now)
            for p, part in self.partitions.items():
                if not part.caught_up:
                    continue
                closed = part.closed_through.get(sid)
                if closed is not None and closed >= top:
                    continue
                due = sorted(s for (k, s) in part.buckets if k == sid and s <= top)
                first_empty = top if closed is None else max(closed + 1, top - MAX_EMPTY_GAP)
                for slot in sorted(set(due) | set(range(first_empty, top + 1))):
                    bucket = part.buckets.pop((sid, slot), None)
                    part.min_offset.pop((sid, slot), None)
                    out.append(Partial(sid, slot, p, self._counts(stream, bucket)))
                part.closed_through[sid] = top
        return out

    def commit_offset(self, partition: int, position: int) -> int:
        """The offset to commit for ``partition``: the first one an open slot still needs."""
        part = self.partitions[partition]
        return min(part.min_offset.values(), default=position)

    def take_outcomes(self) -> Counter[tuple[str, str]]:
        """Event outcomes counted since the last call, by ``(stream, outcome)``."""
        out, self.outcomes = self.outcomes, Counter()
        return out
