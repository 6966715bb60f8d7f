"""The ingest hot path: a service inside the Faust worker that reads ``events`` in batches.

Why not a Faust agent: Faust's per-event stream costs tens of microseconds per message (an
agent iterating ``stream.take(5000)`` over raw bytes caps at ~8,500 events/s on the reference
machine), while an aiokafka ``getmany`` loop with msgpack decoding reaches hundreds of
thousands. So the collect stage is this :class:`mode.Service` (started by the Faust worker next
to the app): it owns an aiokafka consumer of ``events`` in its own consumer group
(``<app id>-collect``, so Kafka balances the partitions across workers), feeds each batch to a
:class:`~app.stream.collect.Collector`, and several times per slot

1. closes the slots that are due and sends their partials (counts per group, one message per
   stream, slot and partition) to the internal ``partials`` topic, followed by a clock tick per
   stream, which the Faust ``release`` agent turns into releases and ledger entries;
2. after a flush that closed slots, waits for those sends (and any dead letters) to be
   acknowledged, then commits, per partition, the first offset an open slot still needs.

Offsets are thus committed only at slot boundaries, and a restart or rebalance replays exactly
the events of the open slots. A newly assigned partition is not flushed before the consumer
has caught up with the end offset it had at assignment, so a replay never closes a slot half
read. The ``preferences`` topic is read in full by a second consumer (manual assignment, no
group) before the first batch of events, then tailed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from mode import Service

from app import metrics
from app.stream.collect import Collector
from app.stream.config import Settings
from app.stream.errors import BadEvent
from app.stream.kafka import aiokafka_kwargs
from app.stream.policy import Policy, dead_letter_policy
from app.stream.records import decode_preference, encode_partial, encode_tick
from app.stream.topics import Topics

log = logging.getLogger(__name__)

MAX_RECORDS = 20_000
"""Upper bound of one ``getmany`` batch."""


def tick_interval(settings: Settings) -> float:
    """How often slots are checked for closing: a quarter of the shortest slot, 50 ms to 1 s."""
    return min(1.0, max(0.05, min(s.slot_s for s in settings.streams) / 4))


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, service: IngestService) -> None:
        self.service = service

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.service.on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.service.on_assigned(list(assigned))


class IngestService(Service):
    """Batched consumption of ``events`` into per-slot partials; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        group_id: str,
        policy: Policy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.settings = settings
        self.topics = topics
        self.group_id = group_id
        self.collector = Collector(settings.streams)
        self.policy = policy or dead_letter_policy(self._send_dead_letter)
        self.tick_s = tick_interval(settings)
        self.consuming = False
        self._targets: dict[int, int] = {}
        self._partitions_total = topics.spec("events").partitions
        self._consumer: AIOKafkaConsumer | None = None
        self._prefs: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._pending: list[asyncio.Future[Any]] = []

    # -- lifecycle ----------------------------------------------------------------------------
    async def on_start(self) -> None:
        kw = aiokafka_kwargs(self.settings)
        timeout_ms = int(self.settings.session_timeout_s * 1000)
        self._producer = AIOKafkaProducer(linger_ms=5, **kw)
        await self._producer.start()
        self._prefs = AIOKafkaConsumer(enable_auto_commit=False, **kw)
        await self._prefs.start()
        await self._read_preferences(until_end=True)
        self._consumer = AIOKafkaConsumer(
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=timeout_ms,
            rebalance_timeout_ms=timeout_ms,
            heartbeat_interval_ms=max(500, timeout_ms // 6),
            max_poll_interval_ms=max(timeout_ms, 60_000),
            max_partition_fetch_bytes=4 * 1024 * 1024,
            fetch_max_bytes=16 * 1024 * 1024,
            **kw,
        )
        await self._consumer.start()
        self._consumer.subscribe([self.topics.events], listener=_Rebalance(self))
        log.info("ingest started group=%s topic=%s", self.group_id, self.topics.events)

    async def on_stop(self) -> None:
        # Nothing is committed here: the open slots are replayed by the next owner.
        for client in (self._consumer, self._prefs):
            if client is not None:
                await client.stop()
        if self._producer is not None:
            await self._producer.stop()

    # -- rebalancing --------------------------------------------------------------------------
    async def on_assigned(self, assigned: list[TopicPartition]) -> None:
        assert self._consumer is not None
        ends = await self._consumer.end_offsets(assigned) if assigned else {}
        for tp in assigned:
            self.collector.assign(tp.partition)
            self._targets[tp.partition] = int(ends.get(tp, 0))
        log.info("ingest assigned partitions=%s", sorted(tp.partition for tp in assigned))

    async def on_revoked(self, revoked: list[TopicPartition]) -> None:
        if revoked and self._consumer is not None:
            await self._commit(revoked)
        for tp in revoked:
            self.collector.revoke(tp.partition)
            self._targets.pop(tp.partition, None)
        self.consuming = False

    # -- the loop -----------------------------------------------------------------------------
    @Service.task
    async def _consume(self) -> None:
        assert self._consumer is not None
        consumer, collector, policy = self._consumer, self.collector, self.policy
        last_flush = 0.0
        while not self.should_stop:
            batches = await consumer.getmany(
                timeout_ms=int(self.tick_s * 1000), max_records=MAX_RECORDS
            )
            wall = time.time()
            for tp, records in batches.items():
                p = tp.partition
                if p not in collector.partitions:
                    continue
                add = collector.add
                for rec in records:
                    try:
                        add(p, rec.offset, rec.key, rec.value, wall)
                    except BadEvent as exc:
                        policy(exc, rec, log)
            if not self.consuming:
                await self._check_caught_up()
            if wall - last_flush >= self.tick_s:
                last_flush = wall
                await self._flush(wall)

    async def _check_caught_up(self) -> None:
        assert self._consumer is not None
        assignment = self._consumer.assignment()
        for tp in assignment:
            part = self.collector.partitions.get(tp.partition)
            if part is not None and not part.caught_up:
                pos = await self._consumer.position(tp)
                if pos >= self._targets.get(tp.partition, 0):
                    part.caught_up = True
        self.consuming = bool(assignment) and all(
            p.caught_up for p in self.collector.partitions.values()
        )

    async def _flush(self, wall: float) -> None:
        assert self._producer is not None
        partials = self.collector.flush(wall)
        for (sid, outcome), n in self.collector.take_outcomes().items():
            metrics.EVENTS.labels(sid, outcome).inc(n)
        send = self._producer.send
        topic = self.topics.partials
        for pa in partials:
            value = encode_partial(
                pa.stream, pa.slot, pa.partition, self._partitions_total, pa.counts, wall
            )
            await send(topic, key=pa.stream.encode(), value=value)
        for stream in self.settings.streams:
            now = self.collector.clock(stream, wall)
            if now is not None:
                await send(topic, key=stream.id.encode(), value=encode_tick(stream.id, now))
        if partials:
            await self._commit(list(self._consumer.assignment()) if self._consumer else [])
        await self._read_preferences(until_end=False)

    async def _commit(self, tps: list[TopicPartition]) -> None:
        """Commit each partition's first offset still needed, once every send is acknowledged."""
        assert self._consumer is not None and self._producer is not None
        pending, self._pending = self._pending, []
        await asyncio.gather(*pending, return_exceptions=True)
        await self._producer.flush()
        offsets = {}
        for tp in tps:
            if tp.partition in self.collector.partitions:
                position = await self._consumer.position(tp)
                offsets[tp] = self.collector.commit_offset(tp.partition, position)
        if offsets:
            await self._consumer.commit(offsets)

    # -- side inputs --------------------------------------------------------------------------
    def _send_dead_letter(self, key: bytes | None, value: bytes) -> None:
        assert self._producer is not None
        fut = asyncio.ensure_future(
            self._producer.send(self.topics.dead_letter, key=key, value=value)
        )
        fut.add_done_callback(_log_failure)
        self._pending.append(fut)

    async def _read_preferences(self, until_end: bool) -> None:
        """Apply ``preferences`` records; with ``until_end``, read up to the current end first."""
        consumer = self._prefs
        assert consumer is not None
        if not consumer.assignment():
            parts = consumer.partitions_for_topic(self.topics.preferences)
            if parts is None:
                await consumer.topics()
                parts = consumer.partitions_for_topic(self.topics.preferences) or set()
            tps = [TopicPartition(self.topics.preferences, p) for p in sorted(parts)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
        tps = list(consumer.assignment())
        ends = await consumer.end_offsets(tps) if until_end else {}
        while True:
            batches = await consumer.getmany(timeout_ms=0 if not until_end else 200)
            for records in batches.values():
                for rec in records:
                    if rec.key is None:
                        continue
                    user = rec.key.decode("utf-8", "replace")
                    pref = decode_preference(rec.value)
                    if pref is None:
                        self.collector.set_preference(user, None)
                    else:
                        self.collector.set_preference(user, pref[0], pref[1])
            if not until_end:
                return
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                return


def _log_failure(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("dead-letter send failed error=%r", fut.exception())
