"""The collect stage of local mode: a service inside the Faust worker that reads ``reports``.

Like :mod:`app.stream.collect.ingest`, :class:`ReportService` is a
:class:`~app.stream.collect.batch.BatchConsumer`
(for the same reason: Faust's per-message stream is slow) of ``reports`` in its own group
(``<app id>-reports``), with ``collection-requests`` as its side input. It feeds each batch to a
:class:`~app.stream.collect.tally.ReportCollector`, and several times per round

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

import logging
from collections.abc import Mapping
from typing import Any

from aiokafka import TopicPartition

from app import metrics
from app.stream.collect.batch import BatchConsumer, tick_interval
from app.stream.collect.policy import Policy, dead_letter_policy
from app.stream.collect.tally import ReportCollector
from app.stream.config import Settings
from app.stream.errors import BadEvent
from app.stream.internal import PartitionTally, Tick
from app.stream.records import decode_report
from app.stream.topics import Topics

log = logging.getLogger(__name__)


class ReportService(BatchConsumer):
    """Batched consumption of ``reports`` into per-round tallies; see the module docstring."""

    collector: ReportCollector

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
            source=topics.reports,
            side_input=topics.collection_requests,
            collector=ReportCollector(settings.streams),
            policy=policy or dead_letter_policy(self._send_dead_letter, metrics.REPORTS),
            **kwargs,
        )
        self.tick_s = tick_interval((s.round_s for s in settings.streams if s.local), 0.25)
        self._partitions_total = topics.spec("reports").partitions

    def _apply_side_input(self, record: Any) -> None:
        try:
            rnd = self.collector.add_request(record.value)
        except Exception as exc:  # noqa: BLE001 - written by dpstream; log and go on
            log.error("unreadable collection request offset=%d error=%r", record.offset, exc)
            return
        if rnd is not None:
            log.debug("request stream=%s slot=%d round=%s", rnd.stream, rnd.slot, rnd.rnd)

    # -- the loop (BatchConsumer._consume) -----------------------------------------------------
    async def _before_batch(self, batches: Mapping[TopicPartition, list[Any]]) -> None:
        """New requests first; all of them, to the broker's end now, when a report names a
        round not known yet (the end the last fetch saw may predate its request: devices answer
        within milliseconds of it)."""
        await self._read_side_input(until_end=False)
        if any(self._unknown_round(recs) for recs in batches.values()):
            await self._read_side_input(until_end=True, exact_end=True)

    async def _observe(self, wall: float, batches: Mapping[TopicPartition, list[Any]]) -> None:
        """The lag gauge, from the Kafka time of the newest report read per partition."""
        for tp, records in batches.items():
            if records and tp.partition in self.collector.partitions:
                self._newest[tp.partition] = records[-1].timestamp / 1000
        await super()._observe(wall, batches)

    def _unknown_round(self, records: list[Any]) -> bool:
        """Whether the newest report of any stream in a batch names a round newer than every
        one known for that stream.

        Per stream, as one partition interleaves the reports of every local stream: with two
        streams whose rounds start together, the batch's last report may name a known round of
        one stream while the other's new round came just before it (classifying those reports
        before reading their request counted thousands as ``wrong_slot`` per minute in the
        local demo). The batch is read from its end until every local stream has been seen.
        """
        seen: set[str] = set()
        wanted = len(self.collector.streams)
        for record in reversed(records):
            try:
                sid, slot, r, *_ = decode_report(record.value)
            except BadEvent:
                continue
            if sid in seen or sid not in self.collector.streams:
                continue
            seen.add(sid)
            newest = self.collector.newest(sid)
            if newest is None or (slot, r) > newest:
                return True
            if len(seen) == wanted:
                return False
        return False

    async def _flush(self, wall: float) -> None:
        assert self._producer is not None
        tallies = self.collector.flush(wall)
        for sid, slot in sorted(self.collector.late_slots):
            self.late.mark(sid, slot)
        self.collector.late_slots.clear()
        for (sid, outcome), n in self.collector.take_outcomes().items():
            if self.settings.expose_data_counts:
                metrics.REPORTS.labels(sid, outcome).inc(n)
        send, topic = self._producer.send, self.topics.partials
        for t in tallies:
            value = PartitionTally(
                t.stream,
                t.slot,
                t.rnd,
                t.partition,
                self._partitions_total,
                t.support,
                t.reports,
                wall,
            ).encode()
            await send(topic, key=t.stream.encode(), value=value)
        for sid in self.collector.streams:
            tick = Tick(sid, {}, self._partitions_total).encode()
            await send(topic, key=sid.encode(), value=tick)
        if tallies:
            await self._commit(list(self._consumer.assignment()) if self._consumer else [])
