"""The collect stage of local mode: a service inside the Faust worker that reads ``reports``.

Like :mod:`app.stream.ingest` (and for the same reason: Faust's per-message stream is slow), a
:class:`mode.Service` owns an aiokafka consumer of ``reports`` in its own group
(``<app id>-reports``), feeds each batch to a :class:`~app.stream.tally.ReportCollector`, and
several times per round

1. reads new ``collection-requests`` (a consumer with manual assignment, read from the start
   at boot, then tailed; on a report for a round it does not know yet it reads to the end once
   before classifying the report, since devices may answer before this service polled);
2. closes the rounds whose deadline passed and sends one tally per (stream, slot, round,
   partition) to the internal ``partials`` topic, followed by a clock tick per local stream,
   which the ``release`` agent turns into the next request or the slot's release;
3. after a flush that closed rounds, waits for those sends (and any dead letters) to be
   acknowledged, then commits per partition the first offset an open round still needs.

No table is written per report. A newly assigned partition closes no round before the consumer
has caught up with the end offset it had at assignment.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from mode import Service

from app import metrics
from app.stream.config import Settings
from app.stream.errors import BadEvent
from app.stream.kafka import aiokafka_kwargs
from app.stream.policy import Policy, dead_letter_policy
from app.stream.records import decode_report, encode_tally, encode_tick
from app.stream.tally import ReportCollector
from app.stream.topics import Topics

log = logging.getLogger(__name__)

MAX_RECORDS = 20_000
"""Upper bound of one ``getmany`` batch."""


def tick_interval(settings: Settings) -> float:
    """How often rounds are checked for closing: a quarter of the shortest round, 50-250 ms."""
    local = [s.round_s for s in settings.streams if s.local]
    return min(0.25, max(0.05, min(local) / 4))


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, service: ReportService) -> None:
        self.service = service

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self.service.on_revoked(list(revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self.service.on_assigned(list(assigned))


class ReportService(Service):
    """Batched consumption of ``reports`` into per-round tallies; see the module docstring."""

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
        self.collector = ReportCollector(settings.streams)
        self.policy = policy or dead_letter_policy(self._send_dead_letter, metrics.REPORTS)
        self.tick_s = tick_interval(settings)
        self.consuming = False
        self._targets: dict[int, int] = {}
        self._partitions_total = topics.spec("reports").partitions
        self._consumer: AIOKafkaConsumer | None = None
        self._requests: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._pending: list[asyncio.Future[Any]] = []

    # -- lifecycle ----------------------------------------------------------------------------
    async def on_start(self) -> None:
        kw = aiokafka_kwargs(self.settings)
        timeout_ms = int(self.settings.session_timeout_s * 1000)
        self._producer = AIOKafkaProducer(linger_ms=5, **kw)
        await self._producer.start()
        self._requests = AIOKafkaConsumer(enable_auto_commit=False, **kw)
        await self._requests.start()
        await self._read_requests(until_end=True)
        self._consumer = AIOKafkaConsumer(
            group_id=self.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=timeout_ms,
            rebalance_timeout_ms=timeout_ms,
            heartbeat_interval_ms=max(500, timeout_ms // 6),
            max_poll_interval_ms=max(timeout_ms, 60_000),
            **kw,
        )
        await self._consumer.start()
        self._consumer.subscribe([self.topics.reports], listener=_Rebalance(self))
        log.info("reports started group=%s topic=%s", self.group_id, self.topics.reports)

    async def on_stop(self) -> None:
        for client in (self._consumer, self._requests):
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
        log.info("reports assigned partitions=%s", sorted(tp.partition for tp in assigned))

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
        consumer, collector = self._consumer, self.collector
        last_flush = 0.0
        while not self.should_stop:
            batches = await consumer.getmany(
                timeout_ms=int(self.tick_s * 1000), max_records=MAX_RECORDS
            )
            await self._read_requests(until_end=False)
            if any(self._unknown_round(recs) for recs in batches.values()):
                await self._read_requests(until_end=True)
            for tp, records in batches.items():
                if tp.partition not in collector.partitions:
                    continue
                for exc, rec in collector.add_batch(tp.partition, records):
                    self.policy(exc, rec, log)
            if not self.consuming:
                await self._check_caught_up()
            wall = time.time()
            if wall - last_flush >= self.tick_s:
                last_flush = wall
                await self._flush(wall)

    def _unknown_round(self, records: list[Any]) -> bool:
        """Whether the newest report of a batch names a round newer than every known one."""
        if not records:
            return False
        try:
            sid, slot, r, *_ = decode_report(records[-1].value)
        except BadEvent:
            return False
        if sid not in self.collector.streams:
            return False
        newest = self.collector.newest(sid)
        return newest is None or (slot, r) > newest

    async def _check_caught_up(self) -> None:
        assert self._consumer is not None
        assignment = self._consumer.assignment()
        for tp in assignment:
            if self.collector.partitions.get(tp.partition) is False:
                pos = await self._consumer.position(tp)
                if pos >= self._targets.get(tp.partition, 0):
                    self.collector.partitions[tp.partition] = True
        self.consuming = bool(assignment) and all(self.collector.partitions.values())

    async def _flush(self, wall: float) -> None:
        assert self._producer is not None
        tallies = self.collector.flush(wall)
        for (sid, outcome), n in self.collector.take_outcomes().items():
            metrics.REPORTS.labels(sid, outcome).inc(n)
        send, topic = self._producer.send, self.topics.partials
        for t in tallies:
            value = encode_tally(
                t.stream, t.slot, t.rnd, t.partition, self._partitions_total, t.support,
                t.reports, wall,
            )  # fmt: skip
            await send(topic, key=t.stream.encode(), value=value)
        for sid in self.collector.streams:
            await send(topic, key=sid.encode(), value=encode_tick(sid, wall))
        if tallies:
            await self._commit(list(self._consumer.assignment()) if self._consumer else [])

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

    async def _read_requests(self, until_end: bool) -> None:
        """Learn new ``collection-requests``; with ``until_end``, read up to the current end."""
        consumer = self._requests
        assert consumer is not None
        topic = self.topics.collection_requests
        if not consumer.assignment():
            parts = consumer.partitions_for_topic(topic)
            if parts is None:
                await consumer.topics()
                parts = consumer.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
        tps = list(consumer.assignment())
        ends = await consumer.end_offsets(tps) if until_end else {}
        while True:
            batches = await consumer.getmany(timeout_ms=0 if not until_end else 200)
            for records in batches.values():
                for rec in records:
                    try:
                        rnd = self.collector.add_request(rec.value)
                    except Exception as exc:  # noqa: BLE001 - written by dpstream; log and go on
                        log.error("unreadable collection request offset=%d error=%r",
                                  rec.offset, exc)  # fmt: skip
                        continue
                    if rnd is not None:
                        log.debug("request stream=%s slot=%d round=%s", rnd.stream, rnd.slot,
                                  rnd.rnd)  # fmt: skip
            if not until_end:
                return
            positions = [await consumer.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                return


def _log_failure(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled() and fut.exception() is not None:
        log.error("dead-letter send failed error=%r", fut.exception())
