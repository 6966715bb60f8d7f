"""The ingest hot path: reads ``events`` in batches into per-slot partials and progress ticks.

:class:`IngestService` is a :class:`~app.stream.collect.batch.BatchConsumer` (why not a Faust agent:
see :mod:`app.stream.collect.batch`) in its own consumer group (``<app id>-collect``, so Kafka
balances
the partitions across workers). It feeds each batch to a
:class:`~app.stream.collect.events.Collector`, tells it after every poll when each partition's last
fetch response came and whether it found the partition at its end (the partition's progress
follows from that, see :mod:`app.stream.collect.events`), and several times per slot

1. reads the ``preferences`` side input to its end (only the partitions matching its events
   partitions: a user's preferences and events share a partition), so every level change
   appended before a slot ends is known when the slot closes, and saves the level histories it
   changed to the internal ``levels`` topic before any slot closes on them: a worker taking
   over a partition restores them and continues the same gaps (a record not saved yet takes
   effect no earlier than the takeover, after every slot the previous owner closed);
2. closes the slots that are due and sends their partials (counts per group, one message per
   stream, slot and partition) to the internal ``partials`` topic, followed by one tick per
   stream with the progress of every partition it owns, which the Faust ``release`` agent
   turns into releases and ledger entries;
3. after a flush that closed slots, waits for those sends (and any dead letters) to be
   acknowledged, then commits, per partition, the first offset an open slot still needs.

Offsets are thus committed only at slot boundaries, and a restart or rebalance replays exactly
the events of the open slots. A newly assigned partition is not flushed before the consumer
has caught up with the end offset it had at assignment, so a replay never closes a slot half
read. The number of ``events`` partitions must be the one ``topics/events.yaml`` declares: a
different count is refused (partitions decide which users a worker sees, see
:mod:`app.stream.collect.partitioning`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import time
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from mode import Service

from app import metrics
from app.stream.collect.batch import BatchConsumer, LateSignal, Unwatched, tick_interval
from app.stream.collect.events import Collector
from app.stream.collect.partitioning import partition_for
from app.stream.collect.policy import Policy, dead_letter_policy
from app.stream.collect.preferences import (
    OFFSET_KEY,
    LevelsError,
    LevelsRestore,
    UserLevels,
    decode_levels,
    encode_history,
    encode_mark,
    too_far,
)
from app.stream.config import Settings
from app.stream.errors import BadEvent
from app.stream.internal import Tick
from app.stream.kafka import aiokafka_kwargs
from app.stream.records import decode_preference
from app.stream.topics import Topics

log = logging.getLogger(__name__)


GAP_S = 3.0
"""No fetch response for this long (the consumer polls every ~0.5 s when idle) is a gap: the
broker is unreachable or this worker was paused; progress waits for the fetches to settle."""


SAVE_CHUNK = 2_000
"""``levels`` records in flight at most while level changes are saved."""

GC_THRESHOLDS = (50_000, 20, 20)
"""The garbage collector's thresholds in a worker (CPython's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Keep the cyclic garbage collector off the hot path.

    Each fetched batch allocates tens of thousands of tracked objects (the Kafka client's
    records), so with the default thresholds a collection runs every 700 allocations and a full
    one, which walks every object of the worker (Faust, the clients, the tables), every 100 of
    those: on the throughput bench that was about a third of the ingest CPU. The objects alive
    once the worker has started are moved out of the collector's sight (:func:`gc.freeze`) and
    collections run every :data:`GC_THRESHOLDS` allocations instead. The open slots' dicts of
    strings and numbers are not tracked at all.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class IngestService(BatchConsumer):
    """Batched consumption of ``events`` into per-slot partials; see the module docstring."""

    consumer_options = {"max_partition_fetch_bytes": 4 << 20, "fetch_max_bytes": 16 << 20}
    co_partitioned = True  # preferences partition p holds the users of events partition p
    collector: Collector

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        group_id: str,
        policy: Policy | None = None,
        clipped: LateSignal | None = None,
        **kwargs: Any,
    ) -> None:
        self._partitions_total = topics.spec("events").partitions
        super().__init__(
            settings,
            topics,
            group_id,
            source=topics.events,
            side_input=topics.preferences,
            collector=Collector(
                settings.streams,
                self._partitions_total,
                settings.noise_key.reveal() if settings.noise_key else None,
                settings.deployment,
            ),
            policy=policy or dead_letter_policy(self._send_dead_letter),
            **kwargs,
        )
        self.tick_s = tick_interval((s.slot_s for s in settings.streams), 1.0)
        self.clipped: LateSignal = clipped or Unwatched()
        """Where an open stream's slots that the contribution bound dropped a value of are
        counted (one bit per slot: ``dpstream_clipped_slots``, registered by the worker)."""
        self.hold_s = settings.delivery_horizon_s
        """Progress holds this long after a fetch gap (:mod:`app.stream.collect.events`)."""
        self._applied: dict[int, int] = {}
        """Per preferences partition, the next offset to apply."""
        self._saved: dict[int, int] = {}
        """Per preferences partition, the next offset ``levels`` records as applied."""
        self._unsaved: dict[str, int] = {}
        """The users whose level changed since the last save, and their partition."""
        self._catch_up: dict[int, tuple[int, float]] = {}
        """Per preferences partition: its end offset and the time it was assigned here."""

    async def on_start(self) -> None:
        await super().on_start()
        tune_gc()

    def _apply_side_input(self, record: Any) -> None:
        p = record.partition
        self._applied[p] = record.offset + 1
        if record.key is None:
            return
        if not self.collector.owns(record.key, p):
            # Co-partitioned with events: a record elsewhere would set nobody's level here.
            self.policy(
                BadEvent("wrong_partition", "preference not in its key's partition"), record, log
            )
            return
        if too_far(record.timestamp / 1000, time.time(), self.settings.streams):
            self.policy(BadEvent("bad_time", "preference stamped past the horizon"), record, log)
            return
        user = record.key.decode("utf-8", "replace")
        level = decode_preference(record.value)
        target, assigned_at = self._catch_up.get(p, (0, -math.inf))
        not_before = assigned_at if record.offset < target else -math.inf
        history = self.collector.set_preference(user, level, record.timestamp / 1000, not_before)
        if history is not None:
            self._unsaved[user] = p  # the history is read back when saved: one copy, packed

    # -- the levels topic ---------------------------------------------------------------------
    async def _side_starts(self, new: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Restore the users' levels of newly assigned partitions from ``levels`` and start
        their ``preferences`` where the previous owner stopped applying them.

        Records the previous owner may not have saved (those already in the topic now, from the
        saved offset on) take effect no earlier than now: no slot it closed can change group.
        Each ``levels`` record is checked (:func:`decode_levels`: refused and dead-lettered if
        malformed) and each restored history against the ``preferences`` records before the
        saved offset (:class:`LevelsRestore`): a history they could not have made is replaced
        and saved again.
        """
        assert self._side is not None
        ends = await self._side.end_offsets(new)
        now = time.time()
        for tp in new:
            self._catch_up[tp.partition] = (int(ends[tp]), now)
        streams = self.settings.streams
        restore = LevelsRestore(n for s in streams for n in s.level_names)
        consumer = AIOKafkaConsumer(enable_auto_commit=False, **aiokafka_kwargs(self.settings))
        await consumer.start()
        try:
            tps = [TopicPartition(self.topics.levels, tp.partition) for tp in new]
            for rec in await _read_to_end(consumer, tps, {}):
                self._restore(rec, restore)
            marks = {tp: restore.starts.get(tp.partition, 0) for tp in new}
            for rec in await _read_to_end(consumer, new, marks):
                at, key = rec.timestamp / 1000, rec.key
                home = key and partition_for(key, self._partitions_total) == rec.partition
                if home and not too_far(at, now, streams):
                    restore.asked(key.decode("utf-8", "replace"), rec.value, at)
        finally:
            await consumer.stop()
        for user, history, why in restore.histories(now):
            self.collector.preferences.restore(user, history)
            if why:
                metrics.INTERNAL_REFUSED.labels("levels", "history").inc()
                log.error("level history refused (%s): the user sits out a gap", why)
                # Saved again: the next owner finds a history consistent with the requests.
                self._unsaved[user] = partition_for(user.encode(), self._partitions_total)
        starts = {TopicPartition(self.side_input, p): o for p, o in restore.starts.items()}
        self._saved.update(restore.starts)
        return starts

    def _restore(self, rec: Any, restore: LevelsRestore) -> None:
        try:
            found = decode_levels(rec.key, rec.value, rec.partition)
            home = partition_for(rec.key, self._partitions_total)
            if isinstance(found, UserLevels) and home != rec.partition:
                raise LevelsError("user record in another partition than its key's")
        except LevelsError as exc:
            self.policy(BadEvent("bad_levels", str(exc)), rec, log)
            return
        restore.add(found)

    async def _save_levels(self) -> bool:
        """Make the level changes applied since the last call durable in ``levels`` (with the
        next ``preferences`` offset per partition) before any slot closes on them."""
        owned = {p: off for p, off in self._applied.items() if p in self.collector.partitions}
        marks = {p: off for p, off in owned.items() if self._saved.get(p) != off}
        if not self._unsaved and not marks:
            return True
        assert self._producer is not None
        topic, send, prefs = self.topics.levels, self._producer.send, self.collector.preferences
        try:
            sent = []
            for user, p in self._unsaved.items():
                history = prefs.history(user)
                if history is None:
                    continue  # forgotten since (its partition was revoked)
                value = encode_history(history)
                sent.append(await send(topic, key=user.encode(), value=value, partition=p))
                if len(sent) >= SAVE_CHUNK:  # bounded: each send in flight holds its record
                    await asyncio.gather(*sent)
                    sent.clear()
            sent += [
                await send(
                    topic,
                    key=OFFSET_KEY + str(p).encode(),
                    value=encode_mark(off),
                    partition=p,
                )
                for p, off in marks.items()
            ]
            await asyncio.gather(*sent)
        except Exception as exc:  # noqa: BLE001 - any failed send: retry, close nothing
            log.error("level changes not saved (%s): no slot closes until they are", exc)
            return False
        self._unsaved.clear()
        self._saved.update(marks)
        return True

    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        assert self._consumer is not None
        found = self._consumer.partitions_for_topic(self.source) or set()
        if found and len(found) != self._partitions_total:
            self.failed = (
                f"{self.source} has {len(found)} partitions but topics/events.yaml declares "
                f"{self._partitions_total}: refusing to count (a user could be counted once per "
                "partition); restore the count, or drain every open slot and update the spec"
            )
            log.error("%s", self.failed)
        await super().on_assigned(assigned)

    # -- the loop (BatchConsumer._consume) -----------------------------------------------------
    async def _observe(self, wall: float, batches: Mapping[TopicPartition, list[Any]]) -> None:
        """Tell the collector about each partition's last fetch; then the lag gauge."""
        assert self._consumer is not None
        consumer, collector = self._consumer, self.collector
        for tp in consumer.assignment():
            part = collector.partitions.get(tp.partition)
            polled = consumer.last_poll_timestamp(tp)
            if part is None or polled is None:
                continue
            highwater = consumer.highwater(tp)
            at_end = highwater is not None and await consumer.position(tp) >= highwater
            collector.observe_fetch(tp.partition, polled / 1000, at_end, GAP_S, self.hold_s)
        collector.observe_silence(wall, GAP_S)
        self._newest = {p: part.max_ts for p, part in collector.partitions.items()}
        await super()._observe(wall, batches)

    def _next_due(self, now: float) -> float:
        """The earliest due time of a wall-clock stream's next slot, from each caught-up
        partition's progress (an event-clock stream closes as its watermark moves, which only a
        batch can do). A progress that lags ``now`` by more than a tick (held after an outage,
        or an idle partition between fetches) counts as ``now``: the tick cadence covers it."""
        collector, dues = self.collector, [math.inf]
        for stream in self.settings.streams:
            if stream.clock != "wall":
                continue
            clock = stream.slots
            for p, part in collector.partitions.items():
                progress = collector.progress(stream, p) if part.caught_up else None
                base = now if progress is None or progress < now - self.tick_s else progress
                dues.append(clock.due(clock.last_closable(base) + 1))
        return min(dues)

    @Service.timer(0.5)
    async def _watch_connection(self) -> None:
        """``connected``: a fetch response came within :data:`GAP_S` for some partition.

        A timer of its own, read from the consumer's fetch timestamps, because the loop itself
        can be held up while the broker is gone (waiting for acknowledgements before a commit).
        """
        consumer = self._consumer
        if consumer is None:
            return
        polled = [consumer.last_poll_timestamp(tp) for tp in consumer.assignment()]
        if polled:
            latest = max((p for p in polled if p is not None), default=0) / 1000
            self.connected = time.time() - latest <= GAP_S

    async def _flush(self, wall: float) -> None:
        assert self._producer is not None
        await self._read_side_input(until_end=True)
        if not await self._save_levels():
            return
        partials, ticks = self.collector.flush()
        for sid, slot in sorted(self.collector.take_late_slots()):
            self.late.mark(sid, slot)
        for sid, slot in sorted(self.collector.take_clipped_slots()):
            self.clipped.mark(sid, slot)
        outcomes = self.collector.take_outcomes()
        if self.settings.expose_data_counts:
            for (sid, outcome), n in outcomes.items():
                metrics.EVENTS.labels(sid, outcome).inc(n)
        send = self._producer.send
        topic, total = self.topics.partials, self._partitions_total
        for pa in partials:
            await send(topic, key=pa.stream.encode(), value=pa.encode())
        progress: dict[str, dict[int, float]] = {}
        for tick in ticks:
            progress.setdefault(tick.stream, {})[tick.partition] = tick.progress
        for sid, by_partition in progress.items():
            await send(topic, key=sid.encode(), value=Tick(sid, by_partition, total).encode())
        if partials:
            await self._commit(list(self._consumer.assignment()) if self._consumer else [])


async def _read_to_end(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], until: dict[TopicPartition, int]
) -> list[Any]:
    """Every record of ``tps`` from the beginning to their end (or, for a partition in
    ``until``, below that offset), in offset order per partition. The end is the high
    watermark fetch responses report, not ListOffsets, which Tansu answers with the last
    batch's base offset + 1 (a restore would miss the rest of that batch)."""
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    out: list[Any] = []
    while True:
        for tp, records in (await consumer.getmany(timeout_ms=200)).items():  # tps only
            out.extend(r for r in records if r.offset < until.get(tp, r.offset + 1))
        done = True
        for tp in tps:
            high = consumer.highwater(tp)
            end = None if high is None else min(high, until.get(tp, high))
            done = done and end is not None and await consumer.position(tp) >= end
        if done:
            return out
