"""What the worker's two batch consumers share: the ``events`` ingest and the ``reports`` tally.

Faust's per-message stream is too slow for the collect stage (an agent iterating
``stream.take(5000)`` over raw bytes caps at ~8,500 messages/s on the reference machine, an
aiokafka ``getmany`` loop with msgpack decoding reaches hundreds of thousands), so each collect
stage is a :class:`mode.Service` started by the Faust worker next to the app.
:class:`BatchConsumer` owns, for one subclass:

* a consumer of the *source* topic in its own consumer group, so Kafka balances the partitions
  across workers; offsets are committed by hand (:meth:`BatchConsumer._commit`) only once every
  send before them is acknowledged, at the first offset a still-open slot or round needs, so a
  restart or rebalance replays exactly what is still open (a commit Kafka refuses, as after a
  rebalance, is given up and counted, ``dpstream_commits_lost_total``: the next one goes
  further);
* a consumer of a *side-input* topic with manual assignment and no group, read in full before
  the first batch and then tailed (:meth:`BatchConsumer._read_side_input`); a subclass whose
  side input is co-partitioned with its source (:attr:`BatchConsumer.co_partitioned`) reads only
  the side partitions matching its assigned source partitions, each from the beginning when it
  is assigned, so a worker holds only its own users' side records;
* a producer for the internal ``partials`` topic and for ``dead-letter``;
* the counting invariant: every fetched record gets exactly one outcome before an offset past
  it is committed (counted by the collector, refused to ``dead-letter``, or passed over to be
  read again after a rebalance); :meth:`BatchConsumer._take` checks it per partition and batch,
  a violation is logged and counted (``dpstream_records_unaccounted_total``), and a commit never
  passes the last record handed over.

The subclass brings the collector (the pure bookkeeping: ``assign``, ``revoke``,
``commit_offset``), the loop, and what a side-input record means.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from mode import Service

from app import metrics
from app.stream.collect.policy import Policy
from app.stream.config import Settings
from app.stream.kafka import abandon_commit, aiokafka_kwargs
from app.stream.topics import Topics

log = logging.getLogger(__name__)

MAX_RECORDS = 20_000
"""Upper bound of one ``getmany`` batch."""
SIDE_RECORDS = 2_000
"""Upper bound of one side-input batch (what is decoded and alive at once while a burst of
side records is read: a worker keeps their effect, never the records)."""
FLUSH_RETRY_S = 0.02
"""Shortest time between two flushes that a slot's close, not the tick, asks for."""
FETCH_WAIT_S = 0.05
"""Longest wait of the source consumer's fetches (see :meth:`BatchConsumer.on_start`)."""
UNACCOUNTED = (
    "offset_gap",
    "gap_taken",
    "offset_repeat",
    "uncounted",
    "not_assigned",
    "position_moved",
)
"""Every way a fetched record can miss its one outcome: the ``reason`` label of
``dpstream_records_unaccounted`` (see :meth:`BatchConsumer._take`)."""
GAP_RETRY_S = 5.0
"""How long offsets the fetches skipped are read again before the gap is taken as the broker's.

Tansu (in-memory storage, two or more producers per partition) may answer a fetch at the tail
with a record batch whose offsets follow one it does not show yet: aiokafka hands over the later
batch and moves its position past the missing one, whose records were then never counted while
the next commit passed them (the steady-load loss of issue 31). Read again a fetch later, the
missing batch is there."""


class LateSignal(Protocol):
    """Where a consumer tells that a slot dropped input as late: the operations wing's
    :class:`~app.stream.ops.late.LateSlots`, registered by the worker (one per worker, shared
    with the release stage, so a slot counts once)."""

    def mark(self, stream: str, slot: int) -> object: ...


class Unwatched:
    """No signal registered (tests, tools): the drops are still counted by outcome."""

    def mark(self, stream: str, slot: int) -> object:
        return None


class Collecting(Protocol):
    """The pure per-partition bookkeeping a :class:`BatchConsumer` drives."""

    def assign(self, partition: int) -> None: ...

    def revoke(self, partition: int) -> None: ...

    def commit_offset(self, partition: int, position: int) -> int: ...

    @property
    def outcomes(self) -> Counter[tuple[str, str]]:
        """Outcomes counted since they were last taken, by ``(stream, outcome)``."""

    def add_batch(self, partition: int, records: list[Any], wall_now: float) -> list[Any]:
        """Take one partition's records; the unusable ones as ``(BadEvent, record)`` pairs."""

    def caught_up(self, partition: int) -> bool:
        """Whether ``partition`` has caught up with its end at assignment."""

    def mark_caught_up(self, partition: int) -> None: ...

    @property
    def partitions(self) -> Mapping[int, object]:
        """The partitions assigned to this worker (and their state)."""


def tick_interval(periods: Iterable[float], ceiling: float) -> float:
    """How often a consumer checks what is due: a quarter of the shortest of ``periods`` (slots
    or rounds), at least 50 ms and at most ``ceiling``.

    >>> tick_interval([10.0, 2.0], 1.0), tick_interval([0.1], 1.0), tick_interval([2.0], 0.25)
    (0.5, 0.05, 0.25)
    """
    return min(ceiling, max(0.05, min(periods) / 4))


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, service: BatchConsumer) -> None:
        self.service = service

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.service.on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.service.on_assigned(list(assigned))


class BatchConsumer(Service):
    """A group consumer of ``source``, a tailed ``side_input``, a producer; see the module."""

    consumer_options: dict[str, Any] = {}
    """Extra options of the source consumer (fetch sizes)."""
    co_partitioned = False
    """Whether side-input partition ``p`` holds the keys of source partition ``p``."""

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        group_id: str,
        source: str,
        side_input: str,
        collector: Collecting,
        policy: Policy,
        late: LateSignal | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.late: LateSignal = late or Unwatched()
        """Where the slots that dropped input as late are counted (``dpstream_late_slots``)."""
        self.settings = settings
        self.topics = topics
        self.group_id = group_id
        self.source = source
        self.side_input = side_input
        self.collector = collector
        self.policy = policy
        self.consuming = False
        """Whether every assigned partition has caught up with its end at assignment."""
        self.connected = True
        """Whether fetch responses keep coming (the broker is reachable)."""
        self.failed = ""
        """Why this service refuses to go on (empty: it does not)."""
        self._targets: dict[int, int] = {}
        self._newest: dict[int, float] = {}
        """Per partition, the time of the newest record read (the lag gauge)."""
        self._rebalancing = False
        """Between a revocation and the assignment that ends the rebalance: the side input
        waits (the collector holds no partition to read it for)."""
        self._side_stale: set[int] = set()
        """Co-partitioned side partitions whose source partition was revoked since the last
        read: the collector forgot their records, so they are read again even if the same
        partition comes back to this worker in the same rebalance."""
        self._consumer: AIOKafkaConsumer | None = None
        self._side: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._pending: list[tuple[asyncio.Future[Any], bytes | None, bytes]] = []
        self._in_hand: dict[int, int] = {}
        """Per partition, the first offset of the batch taken from the consumer but not yet
        given to the collector (the consume loop may await before it does)."""
        self._epoch = 0
        """Revocations so far: a batch taken before one is dropped, not counted (the
        partitions kept restart from their commit, the others go to their new owner)."""
        self._next: dict[int, int] = {}
        """Per partition, the offset after the last record handed to the collector (unknown
        until the first batch after an assignment)."""
        self._sought: dict[tuple[int, int], float] = {}
        """``(partition, offset)`` the consumer was sought back to, and since when (monotonic
        time): skipped offsets are read again for at most :data:`GAP_RETRY_S`."""

    def _apply_side_input(self, record: Any) -> None:
        """Take one side-input record into the collector."""
        raise NotImplementedError

    # -- the loop both consumers run ----------------------------------------------------------
    tick_s: float
    """How often the loop checks what is due (:func:`tick_interval`; set by the subclass)."""

    @Service.task
    async def _consume(self) -> None:
        """Fetch a batch, hand each assigned partition's records to the collector (bad ones to
        the policy), observe the fetches, catch up, and flush once per tick."""
        assert self._consumer is not None
        consumer = self._consumer
        last_flush, due = 0.0, self._next_due(time.time())
        while not self.should_stop:
            wait_s = min(self.tick_s, max(FLUSH_RETRY_S, due - time.time()))
            batches = await consumer.getmany(
                timeout_ms=math.ceil(wait_s * 1000), max_records=MAX_RECORDS
            )
            wall = time.time()
            if self.failed:
                continue
            # Records in hand are not in the collector yet: a commit meanwhile (a rebalance
            # during the awaits below) must not pass them.
            self._in_hand = {tp.partition: recs[0].offset for tp, recs in batches.items() if recs}
            epoch = self._epoch
            await self._before_batch(batches)
            if self._epoch == epoch:  # else a rebalance: the consumer reads them again
                for tp, records in batches.items():
                    if records:
                        self._take(tp, records, wall)
            self._in_hand = {}
            await self._check_positions()
            await self._observe(wall, batches)
            if not self.consuming:
                await self._check_caught_up()
            if wall - last_flush >= self.tick_s or (
                wall >= due and wall - last_flush >= FLUSH_RETRY_S
            ):
                last_flush = wall
                await self._flush(wall)
                due = self._next_due(wall)

    def _take(self, tp: TopicPartition, records: list[Any], wall: float) -> None:
        """Hand one partition's records to the collector (the bad ones to the policy) and check
        the counting invariant: each record handed over got exactly one outcome (counted, or
        refused). Only records that follow the last ones handed over are handed over
        (:meth:`_contiguous`); a batch of a partition the collector does not hold is read again
        (the consumer is sought back)."""
        assert self._consumer is not None
        p, first, collector = tp.partition, records[0].offset, self.collector
        if p not in collector.partitions:
            self._unaccounted("not_assigned", tp, len(records), first)
            if tp in self._consumer.assignment():
                self._consumer.seek(tp, first)
            return
        if first != self._next.get(p, first) or records[-1].offset - first + 1 != len(records):
            records = self._contiguous(tp, records)  # rare: O(1) above, per record here
            if not records:
                return
        before = sum(collector.outcomes.values())
        bad = collector.add_batch(p, records, wall)
        for exc, rec in bad:
            self.policy(exc, rec, log)
        uncounted = len(records) - len(bad) - (sum(collector.outcomes.values()) - before)
        if uncounted:
            self._unaccounted("uncounted", tp, uncounted, first)
        self._next[p] = records[-1].offset + 1
        if self._sought:  # rare: forget the offsets read again that are now behind
            self._sought = {
                k: t for k, t in self._sought.items() if k[0] != p or k[1] >= self._next[p]
            }

    def _contiguous(self, tp: TopicPartition, records: list[Any]) -> list[Any]:
        """The records of a batch whose offsets are not one run from the last handed over:
        those already handed over are dropped (``offset_repeat``); at the first offset skipped
        (``offset_gap``) the batch is cut and the consumer sought back to read the rest again,
        for at most :data:`GAP_RETRY_S` (a gap the broker keeps is then taken: ``gap_taken``)."""
        assert self._consumer is not None
        p = tp.partition
        offsets = np.array([r.offset for r in records], dtype=np.int64)
        want = self._next.get(p, int(offsets[0]))
        if offsets[0] < want:
            seen = offsets < want
            self._unaccounted("offset_repeat", tp, int(seen.sum()), int(offsets[0]))
            records = [r for r, old in zip(records, seen.tolist(), strict=True) if not old]
            offsets = offsets[~seen]
            if not records:
                return []
        skips = np.flatnonzero(offsets != want + np.arange(offsets.shape[0]))
        if skips.shape[0] == 0:
            return records
        cut = int(skips[0])
        missing = want + cut
        new = (p, missing) not in self._sought
        if self._read_again(tp, missing):
            if new:
                self._unaccounted("offset_gap", tp, int(offsets[cut]) - missing, missing)
            return records[:cut]
        self._unaccounted("gap_taken", tp, int(offsets[-1]) + 1 - want - len(records), missing)
        return records

    async def _check_positions(self) -> None:
        """The consumer's position of each partition must be right after the last record
        handed over: one further means offsets it moved past were never handed to the
        collector. It is sought back to read them (for at most :data:`GAP_RETRY_S`: a gap the
        broker keeps is then taken, ``gap_taken``)."""
        assert self._consumer is not None
        consumer, epoch = self._consumer, self._epoch
        for tp in consumer.assignment():
            want = self._next.get(tp.partition)
            if want is None:
                continue
            at = await consumer.position(tp)
            if self._epoch != epoch:
                return  # a rebalance meanwhile: positions restart from the commits
            if at <= want:
                continue  # behind: what comes again is not counted twice (_contiguous)
            new = (tp.partition, want) not in self._sought
            if self._read_again(tp, want):
                if new:
                    self._unaccounted("position_moved", tp, at - want, want)
            else:
                self._unaccounted("gap_taken", tp, at - want, want)
                self._next[tp.partition] = at

    def _read_again(self, tp: TopicPartition, offset: int) -> bool:
        """Seek ``tp`` back to ``offset`` to read again what the fetches skipped; False (and no
        seek) once :data:`GAP_RETRY_S` passed since the first time for that offset."""
        assert self._consumer is not None
        since = self._sought.setdefault((tp.partition, offset), time.monotonic())
        if time.monotonic() - since > GAP_RETRY_S:
            return False
        self._consumer.seek(tp, offset)
        return True

    def _unaccounted(self, reason: str, tp: TopicPartition, n: int, offset: int) -> None:
        """Log and count a violation of the counting invariant (see :meth:`_take`)."""
        metrics.RECORDS_UNACCOUNTED.labels(self.shortlabel, reason).inc(n)
        log.error(
            "%s: %d records without one outcome reason=%s partition=%d offset=%d",
            self.shortlabel,
            n,
            reason,
            tp.partition,
            offset,
        )

    def _next_due(self, now: float) -> float:
        """When the loop should flush next, besides once per tick: the moment something may
        close (a slot's end plus grace), so a release does not wait up to a tick for it; while
        that moment has passed but the input has not yet shown it (progress lags by a fetch),
        every :data:`FLUSH_RETRY_S`. Never by default."""
        return math.inf

    async def _before_batch(self, batches: Mapping[TopicPartition, list[Any]]) -> None:
        """What to read before a batch is taken (nothing by default)."""

    async def _observe(self, wall: float, batches: Mapping[TopicPartition, list[Any]]) -> None:
        """After a batch: what the fetches tell (the subclass), then the lag gauge."""
        metrics.CONSUMER_LAG_SECONDS.labels(self.source).set(await self._lag(wall, self._newest))

    async def _flush(self, wall: float) -> None:
        """Close what is due and send it (the subclass)."""
        raise NotImplementedError

    async def _check_caught_up(self) -> None:
        """Mark the partitions whose position reached their end at assignment; ``consuming``
        once all have."""
        assert self._consumer is not None
        assignment, collector = self._consumer.assignment(), self.collector
        for tp in assignment:
            p = tp.partition
            if p in collector.partitions and not collector.caught_up(p):
                target = self._targets.get(p)  # None: its end is being asked for
                if target is not None and await self._consumer.position(tp) >= target:
                    collector.mark_caught_up(p)
        self.consuming = bool(assignment) and all(
            collector.caught_up(p) for p in collector.partitions
        )

    # -- lifecycle ----------------------------------------------------------------------------
    async def on_start(self) -> None:
        metrics.CONSUMER_LAG_SECONDS.labels(self.source).set(0)  # a series from the start
        for reason in UNACCOUNTED:
            metrics.RECORDS_UNACCOUNTED.labels(self.shortlabel, reason)
        kw = aiokafka_kwargs(self.settings)
        timeout_ms = int(self.settings.session_timeout_s * 1000)
        self._producer = AIOKafkaProducer(linger_ms=5, **kw)
        await self._producer.start()
        self._side = AIOKafkaConsumer(enable_auto_commit=False, **kw)
        await self._side.start()
        await self._read_side_input(until_end=True)
        self._consumer = AIOKafkaConsumer(
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=timeout_ms,
            rebalance_timeout_ms=timeout_ms,
            heartbeat_interval_ms=max(500, timeout_ms // 6),
            max_poll_interval_ms=max(timeout_ms, 60_000),
            # A broker may hold an empty fetch for its whole wait even when records arrive
            # meanwhile (Tansu does), and a partition's progress is the time of its last
            # fetch: a caught-up consumer hears new records only this often.
            fetch_max_wait_ms=int(min(self.tick_s, FETCH_WAIT_S) * 1000),
            **self.consumer_options,
            **kw,
        )
        await self._consumer.start()
        self._consumer.subscribe([self.source], listener=_Rebalance(self))
        log.info("%s started group=%s topic=%s", self.shortlabel, self.group_id, self.source)

    async def on_stop(self) -> None:
        # Nothing is committed here: the open slots or rounds are replayed by the next owner.
        for client in (self._consumer, self._side):
            if client is not None:
                await client.stop()
        if self._producer is not None:
            await self._producer.stop()

    # -- rebalancing --------------------------------------------------------------------------
    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        assert self._consumer is not None
        # The consumer holds the partitions already and its fetches may hand their records to
        # the loop during the await below: the collector takes them first, or the loop would
        # pass over records its position (and so the next commit) has moved past.
        for tp in assigned:
            self.collector.assign(tp.partition)
        if assigned:
            self.consuming = False  # the new partitions catch up before anything closes
        self._rebalancing = False
        epoch = self._epoch
        ends = await self._consumer.end_offsets(assigned) if assigned else {}
        if self._epoch == epoch:  # else revoked meanwhile: the next assignment sets them
            for tp in assigned:
                self._targets[tp.partition] = int(ends.get(tp, 0))
        metrics.ASSIGNMENTS.labels(self.shortlabel).inc()
        parts = sorted(tp.partition for tp in assigned)
        log.info("%s assigned partitions=%s", self.shortlabel, parts)

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        self._rebalancing = True
        self._epoch += 1
        if revoked and self._consumer is not None:
            try:
                await self._commit(revoked)
            except KafkaError as exc:  # e.g. leaving the group at shutdown: nothing is lost,
                # the next owner replays from the last commit (open slots are rebuilt)
                log.warning("%s: no commit at revocation (%s)", self.shortlabel, exc)
        self._next.clear()  # every partition kept restarts from its commit
        for tp in revoked:
            self.collector.revoke(tp.partition)
            self._targets.pop(tp.partition, None)
            self._side_stale.add(tp.partition)
        self.consuming = False

    async def _lag(self, wall: float, newest: Mapping[int, float]) -> float:
        """Seconds behind the source: the largest ``wall - newest[p]`` over the assigned
        partitions not read to their end (``newest``: the time of the newest record read from
        each partition), 0 when every partition is at its end."""
        assert self._consumer is not None
        consumer, lag = self._consumer, 0.0
        for tp in consumer.assignment():
            seen = newest.get(tp.partition, -math.inf)
            highwater = consumer.highwater(tp)
            if seen == -math.inf or highwater is None:
                continue
            if await consumer.position(tp) < highwater:
                lag = max(lag, wall - seen)
        return lag

    # -- offsets, sends -----------------------------------------------------------------------
    async def _commit(self, tps: list[TopicPartition]) -> None:
        """Commit each partition's first offset still needed, once every send is acknowledged.

        A dead letter whose send failed is sent again here; while one still fails, nothing is
        committed, so a restart replays (and dead-letters again) what was not acknowledged.
        """
        assert self._consumer is not None and self._producer is not None
        pending, self._pending = self._pending, []
        results = await asyncio.gather(*(f for f, _, _ in pending), return_exceptions=True)
        failed = [
            (k, v)
            for (_, k, v), r in zip(pending, results, strict=True)
            if isinstance(r, BaseException)
        ]
        for key, value in failed:
            self._send_dead_letter(key, value)
        if failed:
            log.error("dead-letter sends failed count=%d: not committing", len(failed))
            return
        await self._producer.flush()
        try:
            offsets = {}
            for tp in tps:
                if tp.partition in self.collector.partitions:
                    position = await self._consumer.position(tp)
                    position = min(
                        position,
                        self._in_hand.get(tp.partition, position),
                        self._next.get(tp.partition, position),
                    )
                    offsets[tp] = self.collector.commit_offset(tp.partition, position)
            if offsets:
                await self._consumer.commit(offsets)
        except KafkaError as exc:
            # Refused (mostly: a rebalance made it void) or the partitions went away meanwhile.
            # The consumer rejoins by itself, and the open slots are replayed from the last
            # commit that landed: give this one up rather than stop consuming.
            abandon_commit(self.shortlabel, exc)

    def _send_dead_letter(self, key: bytes | None, value: bytes) -> None:
        assert self._producer is not None
        fut = asyncio.ensure_future(self._send_and_wait(key, value))
        self._pending.append((fut, key, value))

    async def _send_and_wait(self, key: bytes | None, value: bytes) -> None:
        assert self._producer is not None
        delivery = await self._producer.send(self.topics.dead_letter, key=key, value=value)
        await delivery

    # -- side input ---------------------------------------------------------------------------
    async def _read_side_input(self, until_end: bool, exact_end: bool = False) -> None:
        """Apply new side-input records; with ``until_end``, read up to the current end first:
        the end the background fetches saw, or with ``exact_end`` the broker's end now (one
        round trip), for a caller that knows a newer record exists (the reports service, on a
        report whose request the last fetch predates)."""
        consumer = self._side
        assert consumer is not None
        if self.co_partitioned:
            if self._rebalancing:
                return
            await self._follow_assignment(consumer)
        elif not consumer.assignment():
            parts = consumer.partitions_for_topic(self.side_input)
            if parts is None:
                await consumer.topics()
                parts = consumer.partitions_for_topic(self.side_input) or set()
            tps = [TopicPartition(self.side_input, p) for p in sorted(parts)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
        tps = list(consumer.assignment())
        if not tps:
            return
        ends: dict[TopicPartition, int] = {}
        if until_end:  # the ends the background fetches saw; a broker round trip only at first
            seen = {tp: consumer.highwater(tp) for tp in tps}
            ends = {tp: int(h) for tp, h in seen.items() if h is not None}
            if exact_end or len(ends) < len(tps):
                ends = await consumer.end_offsets(tps)
        while True:
            if until_end and all([await consumer.position(tp) >= ends[tp] for tp in tps]):
                return  # at the end already: never wait for a fetch that brings nothing
            batches = await consumer.getmany(
                timeout_ms=0 if not until_end else 200, max_records=SIDE_RECORDS
            )
            for records in batches.values():
                for rec in records:
                    self._apply_side_input(rec)
            if not until_end:
                return

    async def _follow_assignment(self, consumer: AIOKafkaConsumer) -> None:
        """Co-partitioned side input: read the side partitions of the assigned source
        partitions; a newly assigned one from its beginning, the others where they were.

        A partition revoked since the last read counts as newly assigned, also when the same
        rebalance gave it back: its revocation made the collector forget what its records set
        (a kept partition read on from where it was would leave its users at the default).
        """
        stale = {TopicPartition(self.side_input, p) for p in self._side_stale}
        want = {TopicPartition(self.side_input, p) for p in self.collector.partitions}
        have = set(consumer.assignment()) - stale
        if want == have and not stale:
            return
        kept = {tp: await consumer.position(tp) for tp in want & have}
        new = sorted(want - have, key=lambda tp: tp.partition)
        starts = await self._side_starts(new) if new else {}
        consumer.assign(sorted(want, key=lambda tp: tp.partition))
        for tp, position in {**kept, **starts}.items():
            consumer.seek(tp, position)
        if fresh := [tp for tp in new if tp not in starts]:
            await consumer.seek_to_beginning(*fresh)
        self._side_stale -= {tp.partition for tp in stale}

    async def _side_starts(self, new: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Where to start reading newly assigned co-partitioned side partitions (absent: from
        the beginning)."""
        return {}
