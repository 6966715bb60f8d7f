"""The ingest hot path: reads ``events`` in batches into per-slot partials.

:class:`IngestService` is a :class:`~app.stream.batch.BatchConsumer` (why not a Faust agent:
see :mod:`app.stream.batch`) in its own consumer group (``<app id>-collect``, so Kafka balances
the partitions across workers). It feeds each batch to a
:class:`~app.stream.collect.Collector`, and several times per slot

1. closes the slots that are due and sends their partials (counts per group, one message per
   stream, slot and partition) to the internal ``partials`` topic, followed by a clock tick per
   stream, which the Faust ``release`` agent turns into releases and ledger entries;
2. after a flush that closed slots, waits for those sends (and any dead letters) to be
   acknowledged, then commits, per partition, the first offset an open slot still needs.

Offsets are thus committed only at slot boundaries, and a restart or rebalance replays exactly
the events of the open slots. A newly assigned partition is not flushed before the consumer
has caught up with the end offset it had at assignment, so a replay never closes a slot half
read. The ``preferences`` topic is the side input: read in full before the first batch of
events, then tailed.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mode import Service

from app import metrics
from app.stream.batch import MAX_RECORDS, BatchConsumer
from app.stream.collect import Collector
from app.stream.config import Settings
from app.stream.errors import BadEvent
from app.stream.policy import Policy, dead_letter_policy
from app.stream.records import decode_preference, encode_partial, encode_tick
from app.stream.topics import Topics

log = logging.getLogger(__name__)


def tick_interval(settings: Settings) -> float:
    """How often slots are checked for closing: a quarter of the shortest slot, 50 ms to 1 s."""
    return min(1.0, max(0.05, min(s.slot_s for s in settings.streams) / 4))


class IngestService(BatchConsumer):
    """Batched consumption of ``events`` into per-slot partials; see the module docstring."""

    consumer_options = {"max_partition_fetch_bytes": 4 << 20, "fetch_max_bytes": 16 << 20}
    collector: Collector

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        group_id: str,
        policy: Policy | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            settings,
            topics,
            group_id,
            source=topics.events,
            side_input=topics.preferences,
            collector=Collector(settings.streams),
            policy=policy or dead_letter_policy(self._send_dead_letter),
            **kwargs,
        )
        self.tick_s = tick_interval(settings)
        self._partitions_total = topics.spec("events").partitions

    def _apply_side_input(self, record: Any) -> None:
        if record.key is None:
            return
        user = record.key.decode("utf-8", "replace")
        pref = decode_preference(record.value)
        if pref is None:
            self.collector.set_preference(user, None)
        else:
            self.collector.set_preference(user, pref[0], pref[1])

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
        await self._read_side_input(until_end=False)
