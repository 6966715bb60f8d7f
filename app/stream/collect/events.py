"""The collect stage's state machine: slots, one value per user per slot, progress, counts.

:class:`Collector` is pure bookkeeping (no Kafka, no clock of its own), so ``tests/stream``
drives it directly; :mod:`app.stream.collect.ingest` feeds it batches and fetch observations from
Kafka and ships what :meth:`Collector.flush` returns.

Per events partition it keeps the *open* slots: for each ``(stream, slot)`` the first value
each user sent in the slot (later ones are ``duplicate``) and the smallest offset that fed it.
One-value counting streams keep it as a :class:`~app.stream.collect.first_values.FirstValues`
(keyed user digests in numpy arrays, ~9 bytes per user). A stream with ``max_values: l > 1``
keeps a dict ``user -> tuple`` of the first ``l`` distinct values (a repeated value is
``duplicate``, one more distinct value is ``clipped``). A sum stream
(``sum: {alpha: A}``) keeps ``user -> {value: amount}``: the user's first amount for each of its
first ``l`` distinct values, clipped to ``A``; an event whose amount was cut to ``A`` counts as
``clipped`` (its clipped amount is kept), and its slot closes into per-group *sums* (floats).

Requirement levels are applied when a slot closes, from the users' level histories
(:mod:`app.stream.collect.preferences`), so a preference read after an event of the same slot still
counts; closing turns the dict into a ``groups x d`` count matrix with one ``bincount`` (and a
correction for the few users with a level history).

When a slot closes: each partition has a *progress* time, the event time up to which it is known
to hold everything (:meth:`Collector.progress`), and a slot closes in a partition once that
progress has passed the slot's end plus the stream's grace. Progress is the largest event time
the partition delivered, or, when the consumer has read to the end of the partition, the time of
that fetch. It only moves while the partition's fetches are *settled*: after a gap in fetch
responses (a broker outage, a paused worker) it holds still for the producers' delivery horizon
(``DPSTREAM_DELIVERY_HORIZON_S``, default 10 s; or ``grace_s`` if longer) of healthy fetching,
so events that producers buffered through the gap arrive before the slots they belong to close,
whatever the stream's ``grace_s``. The first fetch of a newly assigned partition is no gap (its
backlog is in the topic): it waits ``grace_s`` only. A replay after a crash or rebalance
therefore closes slots as it reads past them, never because the wall clock moved on. Events of a
slot the partition already closed are ``late`` and dropped. ``clock: event`` streams (replays of
recorded data) use the largest event time each partition delivered for the stream, never past
the wall clock minus the allowed skew, idle partitions following the others
(:mod:`app.stream.collect.watermark`): no producer, partition or stream moves another's clock.

No event moves a clock into the future: an event stamped past the stream's horizon (the wall
clock plus the allowed skew, :meth:`~app.stream.slots.SlotClock.horizon`) is ``bad_time`` on
either clock, so a single record can neither close the open slots of a ``clock: event`` stream
nor make the stage emit a run of empty partials.

Offsets: :meth:`Collector.commit_offset` is the smallest offset still feeding an open slot of
the partition, so committing it and replaying from it after a crash rebuilds exactly the open
slots (events of closed slots met during the replay are re-emitted as partials the release
agent ignores, because it keeps the first partial per slot and partition).

Open-domain streams (``domain: open``): an event's value is a key, and each open slot keeps
each user's ``max_keys`` kept keys (:class:`~app.stream.collect.open_keys.OpenKeys`: the
keyed-hash bound, salted per slot with the deployment's noise key, so a replay keeps the same
keys). An event is ``accepted`` (a pair kept when it came), ``duplicate`` (a pair repeated
within its batch) or ``clipped`` (dropped by the bound when it came); a slot closes into
:class:`~app.stream.internal.OpenPartial` chunks, the kept keys' counts per group. That a slot
dropped something to the bound is the one-bit signal :attr:`Collector.clipped_slots`.

Partitioning: a user's events must all reach the partition its key hashes to
(:mod:`app.stream.collect.partitioning`); an event keyed by someone else, or found in another
partition, is refused (``key_mismatch``, ``wrong_partition``), so one value per user per slot
holds across partitions.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import attrgetter, eq, ne
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from app.dp.open.salt import slot_salt
from app.stream.collect.first_values import FirstValues, digests
from app.stream.collect.open_keys import OUTCOMES, OpenKeys
from app.stream.collect.partitioning import partition_for, partitions_of
from app.stream.collect.preferences import History, Preferences
from app.stream.collect.watermark import EventClocks
from app.stream.config import StreamConfig
from app.stream.errors import ConfigError
from app.stream.internal import OpenPartial, Partial, open_partials
from app.wire.errors import BadEvent
from app.wire.events import Domain, EventBatch, decode_batch

MAX_EMPTY_GAP = 1000
"""At most this many consecutive empty partials are emitted for a partition at once."""
_key_of, _value_of = attrgetter("key"), attrgetter("value")
PARTITION_CACHE = 1 << 20
"""Keys whose partition is remembered (the cache is cleared when it grows past this)."""


@dataclass
class PartitionSlots:
    """Open slots and progress of one events partition."""

    buckets: dict[tuple[str, int], Any] = field(default_factory=dict)
    """Per open slot: :class:`FirstValues`, an open stream's :class:`OpenKeys`, or for other
    streams a dict ``user -> values``."""
    min_offset: dict[tuple[str, int], int] = field(default_factory=dict)
    closed_through: dict[str, int] = field(default_factory=dict)
    caught_up: bool = False
    max_ts: float = -math.inf
    """The largest event time this partition delivered."""
    fetched_at: float = -math.inf
    """Wall time of the last fetch response, and whether it found the partition at its end."""
    at_end: bool = False
    healthy_since: float = math.inf
    """Start of the current run of fetch responses without a gap (inf: in a gap)."""
    hold_s: float = 0.0
    """How long progress stays still from ``healthy_since`` on, besides each stream's grace:
    the producers' delivery horizon after a gap, 0 after the partition's first fetch."""
    progress: dict[str, float] = field(default_factory=dict)
    """Per stream, the progress reached (never moves back)."""


class Record(NamedTuple):
    """One ``events`` record as :meth:`Collector.add_batch` reads it (a Kafka record has the
    same attributes)."""

    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True)
class Progress:
    """How far a partition is known complete for a stream (sent as a tick)."""

    stream: str
    partition: int
    progress: float


class Collector:
    """Aggregates events per partition and slot; see the module docstring."""

    def __init__(
        self,
        streams: Iterable[StreamConfig],
        partitions_total: int,
        noise_key: bytes | None = None,
        deployment: str = "",
    ) -> None:
        """``noise_key`` and ``deployment`` salt the open streams' contribution bound
        (:func:`app.dp.open.salt.slot_salt`); required when a stream is open."""
        self.streams = {s.id: s for s in streams}
        if noise_key is None and any(s.is_open for s in self.streams.values()):
            raise ConfigError(
                "open-domain streams need the noise key: it salts the contribution bound"
            )
        self._noise_key, self._deployment = noise_key or b"", deployment
        self.domains = {sid: Domain.of(s) for sid, s in self.streams.items()}
        self.partitions_total = partitions_total
        self.partitions: dict[int, PartitionSlots] = {}
        self.preferences = Preferences(lv.name for s in self.streams.values() for lv in s.levels)
        self.event_clocks = EventClocks()
        """Per partition, the newest event time of each ``clock: event`` stream."""
        self.wall = -math.inf
        """The latest wall time a batch or a poll came at (event clocks are capped by it)."""
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.late_slots: set[tuple[str, int]] = set()
        """``(stream, slot)`` pairs that dropped an event as late since :meth:`take_late_slots`."""
        self.clipped_slots: set[tuple[str, int]] = set()
        """Open streams' ``(stream, slot)`` pairs closed since :meth:`take_clipped_slots` in
        which the contribution bound dropped a value."""
        self._slot_s = {sid: s.slot_s for sid, s in self.streams.items()}
        # Sum streams' bounds (empty when every stream counts: one falsy test per event).
        self._alpha = {sid: s.alpha for sid, s in self.streams.items() if s.alpha is not None}
        self._partition_of: dict[bytes, int] = {}

    # -- partitions ---------------------------------------------------------------------------
    def assign(self, partition: int) -> None:
        self.partitions[partition] = PartitionSlots()
        self.event_clocks.forget(partition)

    def caught_up(self, partition: int) -> bool:
        return self.partitions[partition].caught_up

    def mark_caught_up(self, partition: int) -> None:
        self.partitions[partition].caught_up = True

    def revoke(self, partition: int) -> None:
        """Forget a partition's open slots and its users' levels: its next owner replays the
        slots from the commit and the levels from the co-partitioned ``preferences``."""
        self.partitions.pop(partition, None)
        self.event_clocks.forget(partition)
        total = self.partitions_total  # not cached: every user with a level would be
        self.preferences.forget(
            u for u in self.preferences.users if partition_for(u.encode(), total) == partition
        )

    def owns(self, key: bytes, partition: int) -> bool:
        """Whether ``key`` hashes to ``partition`` and that partition is assigned here."""
        return partition in self.partitions and self._partition(key) == partition

    def observe_fetch(
        self, partition: int, fetched_at: float, at_end: bool, gap_s: float, hold_s: float = 0.0
    ) -> None:
        """A fetch response for ``partition`` came at ``fetched_at`` (wall time); ``at_end``:
        the consumer's position had reached the partition's end. A response more than
        ``gap_s`` after the previous one starts a new healthy run, during whose first
        ``hold_s`` (the producers' delivery horizon) progress holds still (see the module)."""
        part = self.partitions.get(partition)
        if part is None or fetched_at <= part.fetched_at:
            return
        if fetched_at - part.fetched_at > gap_s:
            # The first fetch after an assignment is no outage: what is in the topic is read
            # before the partition counts as caught up. After a gap, producers may still be
            # delivering what they buffered through it.
            part.hold_s = hold_s if part.fetched_at > -math.inf else 0.0
            part.healthy_since = fetched_at
        part.fetched_at, part.at_end = fetched_at, at_end

    def observe_silence(self, wall_now: float, gap_s: float) -> None:
        """No fetch response for more than ``gap_s``: every partition is in a gap."""
        self.wall = max(self.wall, wall_now)
        for part in self.partitions.values():
            if wall_now - part.fetched_at > gap_s:
                part.healthy_since = math.inf

    # -- preferences --------------------------------------------------------------------------
    def set_preference(
        self, user: str, level: str | None, at: float, not_before: float = -math.inf
    ) -> History | None:
        """Apply one ``preferences`` record (``level=None``: back to the default level); the
        user's new history if the level changed.

        ``at`` is the record's Kafka timestamp; the change never takes effect in a slot this
        worker already closed for the user's partition, nor before ``not_before`` (see
        :mod:`app.stream.collect.ingest`: records a previous owner may not have applied).
        """
        # Not through the partition cache: a burst of preferences would fill it with users
        # who send no events (the cache is for the event hot path).
        part = self.partitions.get(partition_for(user.encode(), self.partitions_total))
        floor = not_before
        if part is not None:
            for sid, closed in part.closed_through.items():
                floor = max(floor, self.streams[sid].slots.end(closed))
        return self.preferences.change(user, level, at, floor)

    # -- events -------------------------------------------------------------------------------
    def _partition(self, key: bytes) -> int:
        p = self._partition_of.get(key)
        if p is None:
            if len(self._partition_of) >= PARTITION_CACHE:
                self._partition_of.clear()
            p = self._partition_of[key] = partition_for(key, self.partitions_total)
        return p

    def add(
        self, partition: int, offset: int, key: bytes | None, raw: bytes | None, wall_now: float
    ) -> None:
        """Count one ``events`` record; :class:`BadEvent` for an unusable one."""
        bad = self.add_batch(partition, [Record(offset, key, raw)], wall_now)
        if bad:
            raise bad[0][0]

    def add_batch(
        self, partition: int, records: Iterable[Any], wall_now: float
    ) -> list[tuple[BadEvent, Any]]:
        """Count a batch of ``events`` records of one partition (objects with ``offset``,
        ``key``, ``value``); return the unusable ones with their :class:`BadEvent`.

        The hot path: one call per fetched batch. The rules are checked once over the whole
        batch (:meth:`check`); a batch whose events are all valid and belong to one one-value
        counting stream is then counted by :meth:`_count_fast` (slot assignment over the batch,
        one dict merge per open slot), any other by :meth:`_count_each`, event by event.
        """
        batch = records if isinstance(records, list) else list(records)
        self.wall = max(self.wall, wall_now)
        if not batch:
            return []
        checked = self.check(partition, batch, wall_now)
        if not checked.codes.any() and self._count_fast(partition, batch, checked, wall_now):
            return []
        return self._count_each(partition, batch, checked, wall_now)

    def add_batch_reference(
        self, partition: int, records: Iterable[Any], wall_now: float
    ) -> list[tuple[BadEvent, Any]]:
        """:meth:`add_batch` event by event (what :meth:`_count_fast` must agree with)."""
        batch = records if isinstance(records, list) else list(records)
        self.wall = max(self.wall, wall_now)
        if not batch:
            return []
        return self._count_each(partition, batch, self.check(partition, batch, wall_now), wall_now)

    def check(self, partition: int, records: list[Any], wall_now: float) -> EventBatch:
        """The batch decoded by the event rules (:func:`app.wire.events.decode_batch`), and the
        service's rules over it, refused records' reasons in ``codes``: the key is the user
        (``key_mismatch``), the user's partition is ``partition`` (``wrong_partition``), no
        time is past the stream's horizon (``bad_time``). Pure but for the partition cache."""
        n = len(records)
        batch = decode_batch(list(map(_value_of, records)), self.domains)
        codes = batch.codes
        keys = list(map(_key_of, records))
        if list(map(str.encode, batch.users)) != keys:
            wrong = ~np.fromiter(map(eq, map(str.encode, batch.users), keys), dtype=bool, count=n)
            batch.refuse(wrong, "key_mismatch", "the message key must be the event's user")
        if not codes.any():  # every key is bytes: their partitions over the batch
            elsewhere = partitions_of(keys, self.partitions_total) != partition
        else:
            where = {k: self._partition(k) for k in set(keys) if k is not None}
            elsewhere = np.fromiter(
                map(ne, map(where.get, keys), repeat(partition)), dtype=bool, count=n
            )
        if elsewhere.any():
            batch.refuse(elsewhere, "wrong_partition", "not the partition the user's key hashes to")
        horizon = {sid: self.streams[sid].slots.horizon(wall_now) for sid in batch.kinds if sid}
        if len(horizon) == 1 and not codes.any():
            limit: Any = next(iter(horizon.values()))
        else:
            limit = np.fromiter(map(horizon.get, batch.streams, repeat(np.inf)), float, count=n)
        future = batch.ts > limit
        if future.any():
            ts = batch.ts
            batch.refuse(
                future,
                "bad_time",
                lambda i: f"ts {float(ts[i])} is past the allowed clock skew",
            )
        return batch

    def _count_fast(
        self, partition: int, records: list[Any], batch: EventBatch, wall_now: float
    ) -> bool:
        """Count a batch of valid events as :meth:`_count_each` would, if they all belong to
        one stream keeping one counted value per user; False (nothing changed) otherwise.

        It assigns slots, counts late events and merges, per open slot, the batch's first value
        per user into the slot's :class:`FirstValues`, keeping values already there.
        """
        sid = batch.streams[0]
        stream = self.streams[sid]
        if stream.alpha is not None or stream.max_values != 1 or len(batch.kinds) != 1:
            return False
        users, ts = batch.users, batch.ts
        values: list[Any] = batch.keys if stream.is_open and batch.keys else batch.values
        ts_max = float(ts.max())
        part = self.partitions[partition]
        if stream.clock == "event":
            self.event_clocks.saw(partition, {sid: ts_max}, wall_now)
        if ts_max > part.max_ts:
            part.max_ts = ts_max
        slots = np.floor_divide(ts, self._slot_s[sid]).astype(np.int64)
        closed = part.closed_through.get(sid)
        counted = self.outcomes
        if closed is not None and int(slots.min()) <= closed:
            late = slots <= closed
            counted[sid, "late"] += int(late.sum())
            self.late_slots.update((sid, int(s)) for s in np.unique(slots[late]))
        accepted = duplicate = 0
        for slot, first, us, vs in _by_slot(slots, users, values):
            if closed is not None and slot <= closed:
                continue
            open_slot = (sid, slot)
            bucket = part.buckets.get(open_slot)
            if bucket is None:
                bucket = part.buckets[open_slot] = self._bucket(stream, slot)
                part.min_offset[open_slot] = records[first].offset
            if stream.is_open:  # each user's smallest-score keys, whatever came before
                _tally(counted, sid, bucket.add(us, vs))
                continue
            fresh = bucket.merge(us, vs)  # users already in the slot keep their value
            accepted += fresh
            duplicate += len(us) - fresh
        if accepted:
            counted[sid, "accepted"] += accepted
        if duplicate:
            counted[sid, "duplicate"] += duplicate
        return True

    def _bucket(self, stream: StreamConfig, slot: int) -> Any:
        """A new open slot's bucket (see :class:`PartitionSlots`)."""
        if stream.is_open:
            salt = slot_salt(self._noise_key, self._deployment, stream.id, slot)
            return OpenKeys(stream.max_keys, salt)
        if stream.max_values == 1 and stream.alpha is None:
            return FirstValues(stream.d)
        return {}

    def _count_each(
        self, partition: int, records: list[Any], batch: EventBatch, wall_now: float
    ) -> list[tuple[BadEvent, Any]]:
        """Count a checked batch event by event (the path of every batch :meth:`_count_fast`
        declines); return the refused records with their :class:`BadEvent`. A one-value
        stream's events are gathered per open slot and merged in the batch's order at its end,
        which keeps each user's first value as event by event would."""
        part = self.partitions[partition]
        buckets, min_offset, closed_through = part.buckets, part.min_offset, part.closed_through
        sums, late_slots, slot_s = self._alpha, self.late_slots, self._slot_s
        counted: Counter[tuple[str, str]] = Counter()
        bad: list[tuple[BadEvent, Any]] = []
        newest: dict[str, float] = {}  # per event-clock stream, the batch's newest event time
        firsts: dict[tuple[str, int], tuple[list[str], list[Any]]] = {}
        max_ts = part.max_ts
        codes = batch.codes.tolist()
        stamps, amounts = batch.ts.tolist(), batch.amounts.tolist()
        keys = batch.keys or [""] * len(records)
        columns = (records, codes, batch.streams, batch.users, stamps, batch.values, keys)
        rows = zip(*columns, strict=True)
        for i, (rec, code, sid, user, ts, value, key) in enumerate(rows):
            if code:
                bad.append((batch.error(i), rec))
                continue
            stream = self.streams[sid]
            if stream.clock == "event" and ts > newest.get(sid, -math.inf):
                newest[sid] = ts
            if ts > max_ts:
                max_ts = ts
            slot = int(ts // slot_s[sid])
            closed = closed_through.get(sid)
            if closed is not None and slot <= closed:
                counted[sid, "late"] += 1
                late_slots.add((sid, slot))
                continue
            open_slot = (sid, slot)
            bucket: Any = buckets.get(open_slot)  # see PartitionSlots
            one = stream.max_values == 1 and not (sums and sid in sums)
            if bucket is None:
                bucket = buckets[open_slot] = self._bucket(stream, slot)
                min_offset[open_slot] = rec.offset
            if one:  # merged once per slot after the loop, in the batch's order
                us, vs = firsts.setdefault(open_slot, ([], []))
                us.append(user)
                vs.append(key or value)  # an open stream's key, else the index
            elif sums and sid in sums:
                amount = amounts[i]
                counted[
                    sid, _add_amount(bucket, user, value, amount, sums[sid], stream.max_values)
                ] += 1
            else:
                counted[sid, _add_values(bucket, user, value, stream.max_values)] += 1
        for open_slot, (us, vs) in firsts.items():
            if isinstance(buckets[open_slot], OpenKeys):
                _tally(counted, open_slot[0], buckets[open_slot].add(us, vs))
                continue
            fresh = buckets[open_slot].merge(us, vs)
            if fresh:
                counted[open_slot[0], "accepted"] += fresh
            if len(us) > fresh:
                counted[open_slot[0], "duplicate"] += len(us) - fresh
        part.max_ts = max_ts
        if newest:
            self.event_clocks.saw(partition, newest, wall_now)
        self.outcomes.update(counted)
        return bad

    # -- closing ------------------------------------------------------------------------------
    def progress(self, stream: StreamConfig, partition: int) -> float | None:
        """The event time up to which ``partition`` is complete for ``stream`` (None: unknown)."""
        part = self.partitions[partition]
        if stream.clock == "event":
            ends = {p: q.at_end for p, q in self.partitions.items()}
            wall = max(self.wall, part.fetched_at)
            return self.event_clocks.progress(stream.id, stream.slots, partition, ends, wall)
        if part.fetched_at - part.healthy_since >= max(stream.grace_s, part.hold_s):
            # Never past the wall clock: events stamped in the future (clock skew, or a producer
            # stamping ahead) must not close slots before their time.
            read = min(part.max_ts, part.fetched_at)
            now = max(read, part.fetched_at if part.at_end else -math.inf)
            part.progress[stream.id] = max(part.progress.get(stream.id, -math.inf), now)
        found = part.progress.get(stream.id)
        return None if found is None or found == -math.inf else found

    def _counts(self, stream: StreamConfig, slot: int, bucket: Any) -> list[int] | list[float]:
        if stream.alpha is not None:
            return self._sums(stream, slot, bucket or {})
        m, d = len(stream.levels), stream.d
        counts = np.zeros((m, d), dtype=np.int64)
        if bucket:
            if isinstance(bucket, FirstValues):
                values = bucket.values()
                users = list(self.preferences.users)
                found = dict(zip(users, bucket.find(users), strict=True))
                held_by = {u: (v,) for u, v in found.items() if v is not None}
            else:
                values = np.fromiter(chain.from_iterable(bucket.values()), dtype=np.int64)
                held_by = {u: bucket[u] for u in self.preferences.special(bucket)}
            counts[stream.default_level] = np.bincount(values, minlength=d)
            for user, held in held_by.items():
                g = self.preferences.group(stream, user, slot)
                if g == stream.default_level:
                    continue
                mine = list(held)
                np.subtract.at(counts[stream.default_level], mine, 1)
                if g is None:
                    self.outcomes[stream.id, "level_change"] += len(mine)
                else:
                    np.add.at(counts[g], mine, 1)
        return [int(x) for x in counts.reshape(-1)]

    def _sums(self, stream: StreamConfig, slot: int, bucket: dict[str, Any]) -> list[float]:
        """A sum stream's ``groups x d`` sums of the users' clipped amounts. Each amount is
        added once, to its user's group (never added and then subtracted: a float sum must not
        dip below zero)."""
        m, d, default = len(stream.levels), stream.d, stream.default_level
        moved: dict[str, int | None] = {}
        for user in self.preferences.special(bucket):
            g = self.preferences.group(stream, user, slot)
            if g != default:
                moved[user] = g
            if g is None:
                self.outcomes[stream.id, "level_change"] += len(bucket[user])
        cells: list[int] = []
        amounts: list[float] = []
        for user, held in bucket.items():
            g = moved.get(user, default) if moved else default
            if g is not None:
                cells.extend(g * d + v for v in held)
                amounts.extend(held.values())
        sums = np.bincount(np.asarray(cells, dtype=np.int64), weights=amounts, minlength=m * d)
        return [float(x) for x in sums]

    def _open_partials(
        self, stream: StreamConfig, slot: int, partition: int, bucket: OpenKeys | None
    ) -> list[OpenPartial]:
        """An open stream's closed slot: the kept keys' counts per group (users with a level
        history in theirs), as :func:`~app.stream.internal.open_partials` chunks."""
        m, default = len(stream.levels), stream.default_level
        if bucket is None:
            return open_partials(stream.id, slot, partition, self.partitions_total, (), [], m)
        users, index, keys = bucket.close()  # users sorted
        if bucket.dropped:
            self.clipped_slots.add((stream.id, slot))
        group = np.full(users.shape[0], default, dtype=np.int64)
        special = list(self.preferences.users)
        if special and users.shape[0]:
            found = digests(special)
            lo, hi = np.searchsorted(users, found), np.searchsorted(users, found, side="right")
            for user, a, b in zip(special, lo.tolist(), hi.tolist(), strict=True):
                g = self.preferences.group(stream, user, slot) if a < b else default
                if g is None:
                    self.outcomes[stream.id, "level_change"] += b - a
                group[a:b] = -1 if g is None else g
        kept = group >= 0
        n = keys.shape[0]
        cells = np.bincount(group[kept] * n + index[kept], minlength=m * n).reshape(m, n)
        return open_partials(
            stream.id, slot, partition, self.partitions_total, keys.tolist(), cells, m
        )

    def flush(self) -> tuple[list[Partial | OpenPartial], list[Progress]]:
        """Close every slot that is due in every caught-up partition; return their partials
        and every caught-up partition's progress.

        A partition that has just been assigned emits its replayed open slots and then only the
        current last closable slot (earlier slots were closed by its previous owner).
        """
        out: list[Partial | OpenPartial] = []
        ticks: list[Progress] = []
        for sid, stream in self.streams.items():
            for p, part in self.partitions.items():
                if not part.caught_up:
                    continue
                now = self.progress(stream, p)
                if now is None:
                    continue
                ticks.append(Progress(sid, p, now))
                top = stream.slots.last_closable(now)
                closed = part.closed_through.get(sid)
                if closed is not None and closed >= top:
                    continue
                due = sorted(s for (k, s) in part.buckets if k == sid and s <= top)
                first_empty = top if closed is None else max(closed + 1, top - MAX_EMPTY_GAP)
                for slot in sorted(set(due) | set(range(first_empty, top + 1))):
                    bucket = part.buckets.pop((sid, slot), None)
                    part.min_offset.pop((sid, slot), None)
                    if stream.is_open:
                        out.extend(self._open_partials(stream, slot, p, bucket))
                        continue
                    counts = self._counts(stream, slot, bucket)
                    out.append(Partial(sid, slot, p, self.partitions_total, counts))
                part.closed_through[sid] = top
        return out, ticks

    def commit_offset(self, partition: int, position: int) -> int:
        """The offset to commit for ``partition``: the first one an open slot still needs."""
        part = self.partitions[partition]
        return min(part.min_offset.values(), default=position)

    def take_late_slots(self) -> set[tuple[str, int]]:
        """``(stream, slot)`` pairs that dropped an event as late since the last call."""
        out, self.late_slots = self.late_slots, set()
        return out

    def take_clipped_slots(self) -> set[tuple[str, int]]:
        """Open streams' ``(stream, slot)`` pairs closed since the last call in which the
        contribution bound dropped a value (one bit per slot: never how many)."""
        out, self.clipped_slots = self.clipped_slots, set()
        return out

    def take_outcomes(self) -> Counter[tuple[str, str]]:
        """Event outcomes counted since the last call, by ``(stream, outcome)``."""
        out, self.outcomes = self.outcomes, Counter()
        return out


def _by_slot(
    slots: npt.NDArray[np.int64], users: list[str], values: list[Any]
) -> list[tuple[int, int, list[str], list[Any]]]:
    """A batch's events per slot: ``(slot, index of its first event, users, values)``, in
    time order; one slice per slot when the batch is in time order (one producer per
    partition), else gathered per slot."""
    n = slots.shape[0]
    lo, hi = int(slots.min()), int(slots.max())
    if lo == hi:
        return [(lo, 0, users, values)]
    steps = np.diff(slots)
    if (steps >= 0).all():
        bounds = [0, *(np.flatnonzero(steps) + 1).tolist(), n]
        return [
            (int(slots[a]), a, users[a:b], values[a:b])
            for a, b in zip(bounds, bounds[1:], strict=False)
        ]
    out = []
    for s in np.unique(slots).tolist():
        at = np.flatnonzero(slots == s).tolist()
        out.append((s, at[0], [users[i] for i in at], [values[i] for i in at]))
    return out


def _tally(counted: Counter[tuple[str, str]], sid: str, outcomes: tuple[int, ...]) -> None:
    """Count an open slot's :meth:`OpenKeys.add` outcomes (:data:`OUTCOMES`)."""
    for outcome, n in zip(OUTCOMES, outcomes, strict=True):
        if n:
            counted[sid, outcome] += n


def _add_values(bucket: dict[str, Any], user: str, value: int, l_max: int) -> str:
    """Keep an event of a counting stream of ``l_max > 1`` values in its slot's ``bucket``;
    return its outcome (see the module docstring)."""
    held = bucket.get(user)
    if held is None:
        bucket[user] = (value,)
    elif value in held:
        return "duplicate"
    elif len(held) >= l_max:
        return "clipped"
    else:
        bucket[user] = (*held, value)
    return "accepted"


def _add_amount(
    bucket: dict[str, Any], user: str, idx: int, amount: float, alpha: float, l_max: int
) -> str:
    """Keep a sum stream event (value index ``idx``, ``amount``) in its slot's ``bucket``;
    return its outcome (see the module docstring)."""
    held: dict[int, float] | None = bucket.get(user)
    if held is None:
        held = bucket[user] = {}
    elif idx in held or l_max == 1:
        return "duplicate"
    elif len(held) >= l_max:
        return "clipped"
    if amount > alpha:
        held[idx] = alpha
        return "clipped"
    held[idx] = amount
    return "accepted"
