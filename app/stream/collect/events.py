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
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

import numpy as np
from msgpack import unpackb

from app.stream.collect.first_values import FirstValues
from app.stream.collect.partitioning import partition_for, partitions_of
from app.stream.collect.preferences import History, Preferences
from app.stream.collect.watermark import EventClocks
from app.stream.config import StreamConfig
from app.stream.errors import BadEvent
from app.stream.internal import Partial
from app.stream.records import MAX_EVENT_BYTES, Domain, decode_event

MAX_EMPTY_GAP = 1000
"""At most this many consecutive empty partials are emitted for a partition at once."""
_FIELDS = tuple(map(itemgetter, ("stream", "user", "ts", "value")))
_key_of, _value_of = attrgetter("key"), attrgetter("value")
PARTITION_CACHE = 1 << 20
"""Keys whose partition is remembered (the cache is cleared when it grows past this)."""


@dataclass
class PartitionSlots:
    """Open slots and progress of one events partition."""

    buckets: dict[tuple[str, int], Any] = field(default_factory=dict)
    """Per open slot: :class:`FirstValues`, or for other streams a dict ``user -> values``."""
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

    def __init__(self, streams: Iterable[StreamConfig], partitions_total: int) -> None:
        self.streams = {s.id: s for s in streams}
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

        The hot path: one call per fetched batch. A batch whose events are all well formed and
        belong to one-value counting streams goes through :meth:`_add_batch_fast` (checks and
        slot assignment over the whole batch, one array merge per open slot); any other batch,
        or part of a batch, through :meth:`add_batch_reference`, the event-by-event rules.
        """
        batch = records if isinstance(records, list) else list(records)
        self.wall = max(self.wall, wall_now)
        if self._add_batch_fast(partition, batch, wall_now):
            return []
        return self.add_batch_reference(partition, batch, wall_now)

    def _add_batch_fast(self, partition: int, records: list[Any], wall_now: float) -> bool:
        """Count ``records`` as :meth:`add_batch_reference` would, if every one is valid and its
        stream keeps one counted value per user; False (nothing changed) otherwise.

        Phase 1 (:meth:`_fast_batch`) checks the whole batch without touching any state. Phase
        2 assigns slots, counts late events and merges, per open slot, the batch's first value
        per user into the slot's :class:`FirstValues`, keeping values already there.
        """
        n = len(records)
        if n == 0:
            return True
        try:
            checked = self._fast_batch(partition, records, wall_now)
        except Exception:  # noqa: BLE001 - any oddity in any field: the reference path names it
            return False
        if checked is None:
            return False
        sid, stream, users, values, ts = checked
        ts_max = float(ts.max())
        # Phase 2: every record is valid; count them.
        part = self.partitions[partition]
        if stream.clock == "event":
            self.event_clocks.saw(partition, {sid: ts_max}, wall_now)
        if ts_max > part.max_ts:
            part.max_ts = ts_max
        slots = np.floor_divide(ts, self._slot_s[sid]).astype(np.int64)
        lo, hi = int(slots.min()), int(slots.max())
        closed = part.closed_through.get(sid)
        counted = self.outcomes
        if closed is not None and lo <= closed:
            late = slots <= closed
            counted[sid, "late"] += int(late.sum())
            self.late_slots.update((sid, int(s)) for s in np.unique(slots[late]))
        if lo == hi:
            cuts = [(lo, 0, n)]
        elif (np.diff(slots) >= 0).all():  # in time order (one producer per partition)
            starts = np.flatnonzero(np.diff(slots)) + 1
            bounds = [0, *starts.tolist(), n]
            cuts = [(int(slots[a]), a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
        else:
            cuts = []
        groups = [
            (slot, a, users[a:b], values[a:b])
            for slot, a, b in cuts
            if closed is None or slot > closed
        ]
        if not cuts:
            for s in np.unique(slots):
                if closed is None or s > closed:
                    at = np.flatnonzero(slots == s)
                    groups.append(
                        (int(s), int(at[0]), [users[i] for i in at], [values[i] for i in at])
                    )
        accepted = duplicate = 0
        for slot, first, us, vs in groups:
            open_slot = (sid, slot)
            bucket = part.buckets.get(open_slot)
            if bucket is None:
                bucket = part.buckets[open_slot] = FirstValues(stream.d)
                part.min_offset[open_slot] = records[first].offset
            fresh = bucket.merge(us, vs)  # users already in the slot keep their value
            accepted += fresh
            duplicate += len(us) - fresh
        if accepted:
            counted[sid, "accepted"] += accepted
        if duplicate:
            counted[sid, "duplicate"] += duplicate
        return True

    def _fast_batch(
        self, partition: int, records: list[Any], wall_now: float
    ) -> tuple[str, StreamConfig, list[str], list[Any], np.ndarray] | None:
        """Phase 1 of :meth:`_add_batch_fast`: ``(stream id, stream, users, values, times)``
        when every record of the batch is a valid event of one one-value counting stream, else
        None. Pure: it changes no state.

        It decodes each value with the same msgpack options as
        :func:`~app.stream.records.decode_event` and checks the fields' types before anything
        hashes or compares them (a list or a map in any field declines the batch), then their
        ranges, the keys and partitions, and the horizon, over lists and arrays. Its caller
        treats any exception as a decline, so a record no check foresaw still reaches the
        reference path, which dead-letters it with its reason.
        """
        raws = list(map(_value_of, records))
        if max(map(len, raws)) > MAX_EVENT_BYTES:
            return None
        # Maps of strings and numbers are not tracked by the garbage collector (tuples would
        # be); only a msgpack map gives the four fields (anything else raises).
        evs = list(map(unpackb, raws))
        sids, users, stamps, values = (list(map(get, evs)) for get in _FIELDS)
        if set(map(type, sids)) != {str} or set(map(type, users)) != {str}:
            return None  # checked before any set or dict hashes them: a list is unhashable
        kinds = set(sids)
        if len(kinds) != 1:
            return None  # several streams in a batch: the reference path
        (sid,) = kinds
        stream = self.streams.get(sid)
        if stream is None or stream.alpha is not None or stream.max_values != 1:
            return None
        if not all(users):
            return None
        keys = list(map(_key_of, records))
        if list(map(str.encode, users)) != keys:
            return None  # key_mismatch somewhere (a None key never equals bytes)
        if (partitions_of(keys, self.partitions_total) != partition).any():
            return None
        if not set(map(type, stamps)) <= {float, int}:
            return None
        ts = np.array(stamps, dtype=np.float64)
        if not ((ts >= 0.0) & (ts < 1e11)).all() or float(ts.max()) > stream.slots.horizon(
            wall_now
        ):
            return None
        value_types = set(map(type, values))
        if value_types == {str}:
            index = self.domains[sid].index
            values = [index.get(v, -1) for v in values]
        elif value_types != {int}:
            return None
        vals = np.array(values, dtype=np.int64)
        if not ((vals >= 0) & (vals < stream.d)).all():
            return None
        return sid, stream, users, values, ts

    def add_batch_reference(
        self, partition: int, records: Iterable[Any], wall_now: float
    ) -> list[tuple[BadEvent, Any]]:
        """:meth:`add_batch` event by event: the rules as written (and the path of every batch
        the fast path declines). A one-value stream's events are gathered per open slot and
        merged in the batch's order at its end, which keeps each user's first value as event by
        event would."""
        part = self.partitions[partition]
        buckets, min_offset, closed_through = part.buckets, part.min_offset, part.closed_through
        streams, domains, slot_s, partition_of = (
            self.streams,
            self.domains,
            self._slot_s,
            self._partition_of,
        )
        sums, late_slots = self._alpha, self.late_slots
        newest: dict[str, float] = {}  # per event-clock stream, the batch's newest event time
        horizon = {sid: s.slots.horizon(wall_now) for sid, s in streams.items()}
        counted: Counter[tuple[str, str]] = Counter()
        bad: list[tuple[BadEvent, Any]] = []
        firsts: dict[tuple[str, int], tuple[list[str], list[Any]]] = {}
        max_ts = part.max_ts
        for rec in records:
            key = rec.key
            try:
                sid, user, ts, value = decode_event(rec.value, domains)
                if key is None or key != user.encode():
                    raise BadEvent("key_mismatch", "the message key must be the event's user")
                p = partition_of.get(key)
                if (p if p is not None else self._partition(key)) != partition:
                    raise BadEvent("wrong_partition", "not the partition the user's key hashes to")
                stream = streams[sid]
                if ts > horizon[sid]:
                    raise BadEvent("bad_time", f"ts {ts} is past the allowed clock skew")
                if stream.clock == "event" and ts > newest.get(sid, -math.inf):
                    newest[sid] = ts
            except BadEvent as exc:
                bad.append((exc, rec))
                continue
            except Exception as exc:  # noqa: BLE001 - a record no rule foresaw: refused, not fatal
                bad.append((BadEvent("undecodable", f"unexpected {type(exc).__name__}"), rec))
                continue
            if ts > max_ts:
                max_ts = ts
            slot = int(ts // slot_s[sid])
            closed = closed_through.get(sid)
            if closed is not None and slot <= closed:
                counted[sid, "late"] += 1
                late_slots.add((sid, slot))
                continue
            open_slot = (sid, slot)
            bucket: Any = buckets.get(open_slot)  # FirstValues, or a dict (see PartitionSlots)
            if bucket is None:
                one = stream.max_values == 1 and stream.alpha is None
                bucket = buckets[open_slot] = FirstValues(stream.d) if one else {}
                min_offset[open_slot] = rec.offset
            if sums and sid in sums:
                counted[sid, _add_amount(bucket, user, value, sums[sid], stream.max_values)] += 1
                continue
            l_max = stream.max_values
            if l_max == 1:  # merged once per slot after the loop, in the batch's order
                firsts.setdefault(open_slot, ([], []))
                firsts[open_slot][0].append(user)
                firsts[open_slot][1].append(value)
                continue
            held = bucket.get(user)
            if held is None:
                bucket[user] = (value,)
            elif value in held:
                counted[sid, "duplicate"] += 1
                continue
            elif len(held) >= l_max:
                counted[sid, "clipped"] += 1
                continue
            else:
                bucket[user] = (*held, value)
            counted[sid, "accepted"] += 1
        for open_slot, (users, values) in firsts.items():
            fresh = buckets[open_slot].merge(users, values)
            if fresh:
                counted[open_slot[0], "accepted"] += fresh
            if len(users) > fresh:
                counted[open_slot[0], "duplicate"] += len(users) - fresh
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

    def flush(self) -> tuple[list[Partial], list[Progress]]:
        """Close every slot that is due in every caught-up partition; return their partials
        and every caught-up partition's progress.

        A partition that has just been assigned emits its replayed open slots and then only the
        current last closable slot (earlier slots were closed by its previous owner).
        """
        out: list[Partial] = []
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

    def take_outcomes(self) -> Counter[tuple[str, str]]:
        """Event outcomes counted since the last call, by ``(stream, outcome)``."""
        out, self.outcomes = self.outcomes, Counter()
        return out


def _add_amount(bucket: dict[str, Any], user: str, value: Any, alpha: float, l_max: int) -> str:
    """Keep a sum stream event (``value``: ``(index, amount)`` as :func:`decode_event` gives
    it) in its slot's ``bucket``; return its outcome (see the module docstring)."""
    idx, amount = value
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
