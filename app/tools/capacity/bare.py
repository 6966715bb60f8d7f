"""The ceilings of the capacity bench: bare consume loops on the same topic as the workers.

Each loop reads its share of the partitions from the beginning, decodes every record's msgpack
value and takes the ``bincount`` of the values per fetched batch, with its own process CPU time
(``time.process_time``) up to its last record: what any Python consumer of the topic pays at
least. Two clients, each run as ``K`` processes on the workers' partition shares:

* aiokafka, the worker's own client (records parsed in Python);
* confluent-kafka (librdkafka parses the fetch responses in C, on its own threads, which
  ``process_time`` counts too), a second, lower ceiling.

A loop stops after 2 s without records (the embedded broker's end offsets are not exact).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from app.tools.capacity.fleet import LABELS, machine
from app.wire import events

QUIET_S = 2.0
"""A loop ends after this long without a record."""
BATCH = 20_000
"""Records per fetch call (the worker's ``getmany`` bound)."""

Loop = Callable[[str, str, list[int]], tuple[int, float, float]]


DOMAINS = {"bench": events.Domain(len(LABELS), {x: i for i, x in enumerate(LABELS)})}
"""The benchmark stream's domain (its events are decoded by the service's rules)."""


def _tally(values: list[bytes]) -> None:
    vals = events.decode_batch(values, DOMAINS).values
    np.bincount(np.asarray(vals, dtype=np.int64), minlength=len(LABELS))


def aiokafka_loop(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, float, float]:
    """One aiokafka loop on ``partitions``: (events, CPU seconds, wall seconds) to its last
    record."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> tuple[int, float, float]:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=16 << 20,
        )
        await c.start()
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            seen, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
            cpu, wall, quiet_since = cpu0, wall0, time.monotonic()
            while time.monotonic() - quiet_since < QUIET_S:
                batches = await c.getmany(timeout_ms=200, max_records=BATCH)
                for records in batches.values():
                    _tally([r.value for r in records])
                    seen += len(records)
                if batches:
                    cpu, wall = time.process_time(), time.perf_counter()
                    quiet_since = time.monotonic()
            return seen, cpu - cpu0, wall - wall0
        finally:
            await c.stop()

    return asyncio.run(run())


def confluent_loop(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, float, float]:
    """One confluent-kafka loop on ``partitions``, as :func:`aiokafka_loop`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bare-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
            "max.partition.fetch.bytes": 4 << 20,
            "fetch.max.bytes": 16 << 20,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        seen, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        cpu, wall, quiet_since = cpu0, wall0, time.monotonic()
        while time.monotonic() - quiet_since < QUIET_S:
            msgs = [m for m in c.consume(BATCH, timeout=0.2) if m.error() is None]
            if msgs:
                _tally([m.value() or b"" for m in msgs])
                seen += len(msgs)
                cpu, wall = time.process_time(), time.perf_counter()
                quiet_since = time.monotonic()
        return seen, cpu - cpu0, wall - wall0
    finally:
        c.close()


LOOPS: dict[str, Loop] = {"aiokafka": aiokafka_loop, "confluent-kafka": confluent_loop}


def bare_loops(
    client: str, workers: int, bootstrap: str, topic: str, partitions: int
) -> tuple[int, float]:
    """``workers`` loops of ``client`` on partition shares of ``topic``: print and return
    (events seen, CPU microseconds per event)."""
    shares = [[p for p in range(partitions) if p % workers == k] for k in range(workers)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(shares), mp_context=ctx) as pool:
        n = len(shares)
        runs = list(pool.map(LOOPS[client], [bootstrap] * n, [topic] * n, shares))
    seen = sum(r[0] for r in runs)
    bare_us = sum(r[1] for r in runs) / max(1, seen) * 1e6
    wall = max(max(r[2] for r in runs), 1e-9)
    print(
        f"{len(shares)} bare {client} loop(s), fetch + decode_batch + bincount: "
        f"{seen / wall:,.0f} events/s wall ({seen:,} events); CPU {bare_us:.2f} us/event; "
        f"{machine()}"
    )
    return seen, bare_us
