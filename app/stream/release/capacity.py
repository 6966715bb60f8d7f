"""How many records a source partition holds: the bound the guard puts on a partial's claims.

:class:`EndOffsets` answers ``(topic role, partition) ->`` the partition's end offset, the
records ever appended to it (:class:`~app.stream.release.guard.Capacity` asks only when a
message claims more than the figure it has). It reads the high watermark a fetch response
reports, not ListOffsets alone, which Tansu answers with the last batch's base offset + 1: one
aiokafka consumer, manually assigned, every partition paused but the one asked about, which it
fetches from just below the ListOffsets answer (at most one batch comes back) and pauses again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from app.stream.config import Settings
from app.stream.topics import Topics

log = logging.getLogger(__name__)

FETCH_BYTES = 64 << 10
"""What one probe may fetch of a partition (the records are thrown away)."""


class EndOffsets:
    """``await reader(role, partition)``: the partition's end offset, or None (see the module
    docstring); :meth:`stop` closes the consumer."""

    def __init__(self, settings: Settings, topics: Topics, timeout_s: float = 5.0) -> None:
        self.settings, self.topics, self.timeout_s = settings, topics, timeout_s
        self._consumer: Any = None
        self._lock = asyncio.Lock()

    async def __call__(self, role: str, partition: int) -> int | None:
        async with self._lock:
            try:
                return await asyncio.wait_for(self._read(role, partition), self.timeout_s)
            except Exception as exc:  # noqa: BLE001 - unknown: the guard lets the message in
                log.warning("end offset not read role=%s partition=%d: %r", role, partition, exc)
                return None

    async def _read(self, role: str, partition: int) -> int | None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from app.stream.kafka import aiokafka_kwargs

        if self._consumer is None:
            self._consumer = AIOKafkaConsumer(
                enable_auto_commit=False,
                max_partition_fetch_bytes=FETCH_BYTES,
                **aiokafka_kwargs(self.settings),
            )
            await self._consumer.start()
        consumer = self._consumer
        tp = TopicPartition(self.topics.name(role), partition)
        if tp not in consumer.assignment():
            consumer.assign([*consumer.assignment(), tp])
            consumer.pause(*consumer.assignment())
        listed = (await consumer.end_offsets([tp]))[tp]
        before = consumer.last_poll_timestamp(tp)
        consumer.seek(tp, max(0, listed - 1))
        consumer.resume(tp)
        try:
            while consumer.last_poll_timestamp(tp) == before:
                await consumer.getmany(tp, timeout_ms=200, max_records=1)
        finally:
            consumer.pause(tp)
        high = consumer.highwater(tp)
        return int(max(listed, high) if high is not None else listed)

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
