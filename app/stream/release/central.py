"""The central driver: merge partials, close slots on the partitions' progress, step, release.

The collect stage sends, per events partition, one *partial* per closed slot (counts per
group) and, several times a slot, a *tick* carrying the partition's progress: the event time up
to which it holds everything (:mod:`app.stream.collect.events`). Slot ``s`` is complete when every
partition of ``events`` has either sent its partial for ``s`` or reported progress past
``s``'s end plus grace (partials precede ticks on the stream's ``partials`` partition). It is
then released at once, in order, empty or not.

No slot closes before its stream's clock allows, whatever a message claims
(:meth:`~app.stream.slots.SlotClock.edge`, docs/design.md invariant 7): a wall-clock slot not before
the wall clock passed its due time, an event-time slot not before the wall clock passed its
due time plus the allowed skew. A partition's progress is recorded no further than that edge at
the moment it is heard, so a tick claiming more (forged, or from a collect stage whose clock
runs ahead) moves nothing early; past :data:`CLAIM_SLACK_S` it is logged and named by
``/readyz`` for :data:`SHOW_S` seconds.

A slot that is not complete is forced closed, with zeros for the missing partitions, counted in
``dpstream_slot_timeouts_total`` and logged, only when

* every missing partition has been *silent* (no partial, no tick) for ``release_timeout_s``
  (its worker is gone and no other took it over yet), or
* it has waited ``max_delay_s`` for partitions that are alive but behind (overload: the
  release is late, the lag shows on ``dpstream_consumer_lag_seconds``, and past this bound the
  backlog of those partitions is shed as late).

Both waits count from the moment the slot became closable on the stream's clock (a wall-clock
slot: its due time; an event-time slot: when some partition's progress first passed its due
time, and never before its edge: no progress past a slot, nothing to force), or from the moment
this process started hearing the stream (after a restart, or after a silence of
:data:`SILENCE_S`, e.g. a broker outage), whichever is later: a restart or an outage never
turns replayed slots into timeouts. One message closes at most :data:`MAX_CLOSES_PER_PASS`
slots, forced or not: the agent goes on with the other streams' messages, and the next message
of this stream (the collect stage ticks several times a second) closes the next ones.

A partial for a slot already released is dropped. It is *late data* (counted in
``dpstream_late_partials_total``, and its slot in ``dpstream_late_slots_total``: the
:meth:`~app.stream.release.protocol.ReleaseListener.on_late` the worker wires) only when values
were actually discarded: it holds some count, and the release did not take this partition's
partial with the same counts. The driver remembers, for the last :data:`MERGED_KEEP` released
slots, a digest of each partition's merged partial (in the ``slots`` table under
``<stream>`` + :data:`MERGED_SUFFIX`, written with the release, so a restart keeps it). So a
replayed partial (a restart or rebalance re-reads the events of its open slots and re-closes
slots it had closed), an empty partial, and a partial for a slot older than the stream's first
release or than the remembered ones (history a fresh consumer group reads) are not late data.

A stream's first release is the last slot closable at the moment the driver first hears of it
(on ``clock: event``: at the progress it hears first, or the first partial's slot).
"""

from __future__ import annotations

import bisect
import hashlib
import logging
import math
import time
from collections.abc import Callable, MutableMapping
from operator import itemgetter
from typing import Any

import numpy as np

from app.dp.interfaces import as_period, as_slotted
from app.dp.mechanism import Mechanism
from app.dp.types import Release
from app.stream.config import StreamConfig
from app.stream.internal import (
    Internal,
    OpenPartial,
    OpenSlot,
    Partial,
    Tick,
    decode_merged,
    decode_open_slots,
    encode_open_slots,
)
from app.stream.records import pack
from app.stream.release.entry import LedgerEntry
from app.stream.release.protocol import Publisher

log = logging.getLogger(__name__)

MERGED_KEEP = 512
"""Released slots whose merged partitions' digests are remembered (see the module docstring)."""
MERGED_SUFFIX = "\x00merged"
"""The ``slots`` table key of a stream's merged digests is the stream id plus this suffix."""

SILENCE_S = 5.0
"""No message of a stream for this long (the collect stage ticks several times a second) means
the agent could not hear it (outage, pause): waits restart when it hears it again."""

MAX_CLOSES_PER_PASS = 16
"""Slots one message may close (forced or not) before the agent turns to the next message."""

SHOW_S = 60.0
"""How long ``/readyz`` names a stream after one of its ticks claimed progress past its edge."""
CLAIM_SLACK_S = 2.0
"""A tick may claim this much past the edge unnamed: the hosts' clocks differ a little (it is
capped all the same)."""


class CentralDriver:
    """Slot closing and release of ``mode: central`` streams; see the module docstring."""

    def __init__(
        self,
        publisher: Publisher,
        slots: MutableMapping[str, bytes],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.pub = publisher
        self.slots = slots
        self.clock = clock
        self.start_slot: dict[str, int] = {}
        self.woke: dict[str, float] = {}
        self._last_message: dict[str, float] = {}
        self._heard: dict[str, dict[int, float]] = {}
        self._progress: dict[str, dict[int, float]] = {}
        self._reached: dict[str, list[tuple[float, float]]] = {}
        """Per event-clock stream, ``(progress, wall time)`` each time the largest partition
        progress grew: since it last passed the next slot's due time (:meth:`_prune`)."""
        self.ahead: dict[str, tuple[float, float]] = {}
        """Per stream, the wall time and size (s) of the last progress claimed past its edge."""

    async def on_message(self, stream: StreamConfig, msg: Internal) -> None:
        """Handle one ``partials`` value of a central stream, then release what is complete."""
        sid, now = stream.id, self.clock()
        last = self._last_message.get(sid)
        if last is None or now - last > SILENCE_S:
            self.woke[sid] = now
        self._last_message[sid] = now
        entry = self.pub.read(sid)
        if entry is not None:
            await self.pub.recover(stream, entry)
        heard = self._heard.setdefault(sid, {})
        progress = self._progress.setdefault(sid, {})
        if isinstance(msg, Tick):
            edge = stream.slots.edge(now, stream.clock)
            for p, t in msg.progress.items():
                heard[p] = now
                progress[p] = max(progress.get(p, -math.inf), min(t, edge))
            claimed = max(msg.progress.values(), default=edge)
            if claimed > edge + CLAIM_SLACK_S:
                self._claimed_ahead(stream, claimed - edge, now)
            if stream.clock == "event" and progress:
                self._reach(sid, max(progress.values()), now)
        counted = msg if isinstance(msg, Partial | OpenPartial) else None
        next_slot = self._next_slot(stream, entry, now, counted.slot if counted else None)
        self._prune(stream, next_slot)
        if counted is not None:
            heard[counted.partition] = now
            self._merge(stream, counted, next_slot)
        partitions = msg.partitions
        if len(progress) >= partitions:
            watermark = min(progress.values())
            self.pub.watch.on_progress(stream, watermark)
        await self._close_due(stream, partitions, now)

    # -- state --------------------------------------------------------------------------------
    def _next_slot(
        self,
        stream: StreamConfig,
        entry: LedgerEntry | None,
        now: float,
        partial: int | None = None,
    ) -> int:
        """The slot to release next. A stream's first is the last slot closable at its clock:
        the wall clock, or on ``clock: event`` the progress heard so far, or before any tick
        the slot of the first partial (``partial``: the collect stage sends it before the
        tick of the same flush; the wall clock would skip a replay of older data whole)."""
        if entry is not None and entry.next_slot is not None:
            return entry.next_slot
        if stream.id not in self.start_slot:
            seen = self._progress.get(stream.id, {})
            if stream.clock == "event" and not seen and partial is not None:
                self.start_slot[stream.id] = partial
            else:
                clock = max(seen.values()) if stream.clock == "event" and seen else now
                self.start_slot[stream.id] = stream.slots.last_closable(clock)
        return self.start_slot[stream.id]

    def _claimed_ahead(self, stream: StreamConfig, seconds: float, now: float) -> None:
        last = self.ahead.get(stream.id)
        if last is None or now - last[0] > SHOW_S:
            log.error(
                "progress claimed past the stream's clock stream=%s ahead_s=%.1f: capped",
                stream.id,
                seconds,
            )
        self.ahead[stream.id] = (now, seconds)

    def reasons(self, now: float) -> list[str]:
        """Readiness reasons: streams whose ticks claimed progress past their clock's edge in
        the last :data:`SHOW_S` seconds (a collect stage's clock ahead, or a forged tick)."""
        return [
            f"stream {sid}: progress claimed {ahead:.0f} s past its clock's edge (capped)"
            for sid, (at, ahead) in sorted(dict(self.ahead).items())
            if now - at <= SHOW_S
        ]

    def _reach(self, sid: str, top: float, now: float) -> None:
        reached = self._reached.setdefault(sid, [])
        if not reached or top > reached[-1][0]:
            reached.append((top, now))

    def _reached_at(self, stream: StreamConfig, slot: int) -> float | None:
        """The wall time some partition's progress first passed ``slot``'s due time (None:
        none did yet). Also read from the HTTP thread (readiness): it works on a copy."""
        reached = list(self._reached.get(stream.id, ()))
        found = bisect.bisect_left(reached, stream.slots.due(slot), key=itemgetter(0))
        return reached[found][1] if found < len(reached) else None

    def _prune(self, stream: StreamConfig, next_slot: int) -> None:
        """Forget the milestones no open slot needs (the last one stays: the current top)."""
        reached = self._reached.get(stream.id)
        if reached:
            keep = bisect.bisect_left(reached, stream.slots.due(next_slot), key=itemgetter(0))
            del reached[: max(0, keep - 1)]

    def due_at(self, stream: StreamConfig, slot: int) -> float | None:
        """The wall time from which ``slot`` may close on its stream's clock: a wall-clock
        slot's due time; an event-time slot's when a partition's progress passed its due time,
        never before its due time plus the skew (None: its event time is not reached)."""
        due = stream.slots.due(slot)
        if stream.clock == "wall":
            return due
        reached = self._reached_at(stream, slot)
        return None if reached is None else max(reached, due + stream.slots.skew_s)

    def lag(self, stream: StreamConfig, slot: int, now: float) -> tuple[int, float]:
        """How far ``stream``'s releases are behind its clock when ``slot`` is the first not
        closed: the slots closable on it, and the seconds since ``slot`` became closable."""
        since = self.due_at(stream, slot)
        if since is None or now <= since:
            return 0, 0.0
        top = stream.slots.edge(now, stream.clock)
        if stream.clock == "event":
            top = min(top, max(list(self._progress.get(stream.id, {}).values()), default=top))
        return max(1, stream.slots.last_closable(top) - slot + 1), now - since

    def _open(self, sid: str) -> dict[int, OpenSlot]:
        return decode_open_slots(self.slots.get(sid), sid)

    def _merge(self, stream: StreamConfig, msg: Partial | OpenPartial, next_slot: int) -> None:
        """Add a partition's partial to its open slot (the first one per slot and partition
        wins), or drop one for a released slot, as late data when it discards values."""
        if not isinstance(msg, Partial):
            log.error("partial of another domain stream=%s slot=%d", stream.id, msg.slot)
            return
        slot, part, counts = msg.slot, msg.partition, msg.counts
        if slot < next_slot:
            self._late(stream, slot, part, str(part), digest(counts) if any(counts) else None)
            return
        if len(counts) != len(stream.levels) * stream.d:
            log.error("partial with wrong shape stream=%s slot=%d", stream.id, slot)
            return
        open_slots = self._open(stream.id)
        cur = open_slots.get(slot) or OpenSlot([0] * len(counts))
        if part in cur.parts:
            return  # a replayed partial: the first one per (slot, partition) wins
        open_slots[slot] = cur.merge(part, counts, digest(counts))
        self.slots[stream.id] = encode_open_slots(open_slots)

    def _merged(self, sid: str) -> dict[int, dict[str, int]]:
        key = sid + MERGED_SUFFIX
        return decode_merged(self.slots.get(key), key)

    def _late(
        self, stream: StreamConfig, slot: int, part: int, key: str, digest: int | None
    ) -> None:
        """A partial (``key``: its partition, or partition and chunk) for the released ``slot``
        is dropped; counted as late data when that discards values (``digest``: of its
        counts, None when it holds none)."""
        if self._discards(stream, slot, key, digest):
            self.pub.watch.on_late(stream, slot)
            log.warning(
                "late partial dropped stream=%s slot=%d partition=%d", stream.id, slot, part
            )

    def _discards(self, stream: StreamConfig, slot: int, key: str, digest: int | None) -> bool:
        """Whether dropping this partial for the released ``slot`` discards values."""
        if digest is None:
            return False  # nothing to lose (the collect stage sends empty slots too)
        merged = self._merged(stream.id)
        if slot not in merged:
            # Before the stream's first release, or older than the remembered slots: history a
            # consumer replays, never a slot this stream released without it.
            oldest = min(merged, default=None)
            return oldest is not None and slot > oldest
        return merged[slot].get(key) != digest

    def _remember(self, sid: str, slot: int, digests: dict[str, int]) -> bytes:
        """The merged digests' record with ``slot``'s (written with the release)."""
        merged = self._merged(sid)
        merged[slot] = digests
        for old in sorted(merged)[:-MERGED_KEEP]:
            del merged[old]
        return pack(merged)

    # -- closing ------------------------------------------------------------------------------
    def _sent(self, stream: StreamConfig, slot: int) -> set[int]:
        """Partitions whose partial for ``slot`` was merged whole."""
        cur = self._open(stream.id).get(slot)
        return set(cur.parts) if cur is not None else set()

    def _missing(self, stream: StreamConfig, slot: int, partitions: int) -> list[int]:
        """Partitions that neither sent ``slot``'s partial nor passed its due time."""
        sent = self._sent(stream, slot)
        progress = self._progress.get(stream.id, {})
        due = stream.slots.due(slot)
        return [p for p in range(partitions) if p not in sent and progress.get(p, -math.inf) < due]

    def _forced(self, stream: StreamConfig, slot: int, missing: list[int], now: float) -> bool:
        """Whether to close ``slot`` without ``missing`` (see the module docstring)."""
        closable = self.due_at(stream, slot)
        if closable is None:
            return False
        since = max(self.woke[stream.id], closable)
        heard = self._heard.get(stream.id, {})
        silent = all(now - heard.get(p, -math.inf) >= stream.release_timeout_s for p in missing)
        return (silent and now >= since + stream.release_timeout_s) or (
            now >= since + stream.max_delay_s
        )

    async def _close_due(self, stream: StreamConfig, partitions: int, now: float) -> None:
        edge = stream.slots.edge(now, stream.clock)
        for _ in range(MAX_CLOSES_PER_PASS):
            entry = self.pub.read(stream.id)
            slot = self._next_slot(stream, entry, now)
            if stream.slots.due(slot) > edge:
                return  # never before the stream's clock allows, whatever was claimed
            missing = self._missing(stream, slot, partitions)
            if missing:
                if not self._forced(stream, slot, missing, now):
                    return
                self.pub.watch.on_forced(stream, slot, missing)
                log.warning(
                    "slot closed without partitions stream=%s slot=%d missing=%s",
                    stream.id,
                    slot,
                    missing,
                )
            await self.release_slot(stream, slot, entry)

    async def release_slot(
        self, stream: StreamConfig, slot: int, entry: LedgerEntry | None
    ) -> None:
        """Release ``slot`` exactly once (:mod:`app.stream.release.protocol`, steps 1-5)."""
        sid = stream.id
        # 1. Compute.
        mech = self.pub.mechanism(stream, entry)
        open_slots = self._open(sid)
        cur = open_slots.pop(slot, None)
        shape = (len(stream.levels), stream.d)
        dtype = np.float64 if stream.sums else np.int64  # a sum stream's partials carry sums
        counts = (
            np.zeros(shape, dtype=dtype)
            if cur is None
            else np.asarray(cur.counts, dtype=dtype).reshape(shape)
        )
        started = time.perf_counter()
        population = [lv.population for lv in stream.levels]  # public: never the slot's counts
        placed = step_slot(stream, mech, slot, counts, self.pub.rng(stream, slot), population)
        released_at = self.clock()
        seconds = time.perf_counter() - started
        lag = self.clock() - stream.slots.due(slot) if stream.clock == "wall" else None
        self.pub.watch.on_step(stream, seconds, lag)

        merged = self._remember(sid, slot, dict(cur.digests) if cur is not None else {})

        def leave_open_set() -> None:  # part of step 2, right after the ledger entry
            if cur is not None:
                self.slots[sid] = encode_open_slots(open_slots)
            self.slots[sid + MERGED_SUFFIX] = merged

        await self.pub.release(
            stream, mech, entry or LedgerEntry(), slot, placed, leave_open_set, released_at
        )


def step_slot(
    stream: StreamConfig,
    mech: Mechanism,
    slot: int,
    counts: np.ndarray,
    rng: np.random.Generator,
    population: list[int],
) -> list[tuple[int, Release]]:
    """Step ``mech`` on ``slot``'s counts: its ``(stream slot, release)`` pairs. A period
    mechanism places its own releases (none inside a period, the whole period at its end).
    Pure: ``dpstream replay`` (:mod:`app.tools.replay`) steps its slots through it too."""
    if stream.period:
        period = as_period(mech)
        return period.placed(slot, period.step(counts, rng, population))
    return [(slot, as_slotted(mech).step(counts, rng, population))]


def digest(counts: list[Any]) -> int:
    """A stable 63-bit digest of a partial's counts (ints, or a sum stream's floats)."""
    raw = ",".join(repr(float(c)) for c in counts).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") >> 1
