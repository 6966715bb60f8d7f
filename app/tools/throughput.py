"""``dpstream bench throughput``: events/s through the worker, release latency, bare loops.

Method (one broker: ``$DPSTREAM_BROKER`` or ``--broker``, else an embedded Tansu):

1. Create a fresh set of topics (unique prefix) and produce ``--events`` msgpack events for
   ``--users`` users into ``events``, timestamped in ``--slots`` slots that start ~20 s in the
   future, so that every event is accepted into an open slot whenever the worker reads it.
2. Start ``dpstream worker`` (wall clock, PBA, two levels, d = 10) and scrape its
   ``/metrics`` every 50 ms: throughput = events / time between the first and the last
   counted event (the consumer-group join is not included). This is the real ingest path:
   decode, validate, assign the slot, one value per user per slot, counts per group.
3. Read ``releases``; latency of each slot = arrival at the bench consumer minus the slot's
   end + grace (p50/p99 over the slots).
4. Bare loops on the same topic and broker, no Faust: aiokafka ``getmany`` and confluent-kafka
   ``consume``, each with msgpack decode and a ``bincount`` per batch; print the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import msgpack
import numpy as np

from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.topics import create_topics, load_topics
from app.tools.broker import EmbeddedBroker, free_port

TARGET_EVENTS_S = 50_000
GRACE_S = 0.3
LABELS = [f"c{i}" for i in range(10)]


def _streams_yaml(slot_s: float) -> str:
    return (
        "streams:\n  - id: bench\n"
        f"    labels: {LABELS}\n    slot_s: {slot_s}\n    grace_s: {GRACE_S}\n"
        "    clock: wall\n    release_timeout_s: 2.0\n"
        "    mechanism: {name: pba, noise: laplace}\n"
        "    levels:\n      - {name: strict, w: 20, eps: 1.0}\n"
        "      - {name: relaxed, w: 10, eps: 2.0}\n"
    )


def _produce(
    bootstrap: str, topic: str, n: int, users: int, first_slot: int, slots: int, slot_s: float
) -> float:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000,
            **PRODUCER_CONFIG,
        }
    )
    rng = np.random.default_rng(1)
    values = rng.integers(0, len(LABELS), n)
    started = time.perf_counter()
    for i in range(n):
        user = f"u{i % users}"
        ts = (first_slot + i % slots) * slot_s + slot_s / 2
        event = {"stream": "bench", "user": user, "ts": ts, "value": int(values[i])}
        while True:
            try:
                producer.produce(topic, key=user.encode(), value=msgpack.packb(event))
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    producer.flush(60)
    return n / (time.perf_counter() - started)


def _counted(port: int) -> float:
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback only
            text = r.read().decode()
    except OSError:
        return -1.0
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith("dpstream_events_total{")
    )


def _bare_aiokafka(bootstrap: str, topic: str, n: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> float:
        c = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            max_partition_fetch_bytes=4 << 20,
            fetch_max_bytes=16 << 20,
        )
        await c.start()
        try:
            parts = c.partitions_for_topic(topic) or set()
            if not parts:
                await c.topics()
                parts = c.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in parts]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            seen, started = 0, time.perf_counter()
            while seen < n:
                batches = await c.getmany(timeout_ms=1000, max_records=20_000)
                for records in batches.values():
                    vals = [msgpack.unpackb(r.value)["value"] for r in records]
                    np.bincount(np.asarray(vals, dtype=np.int64), minlength=len(LABELS))
                    seen += len(records)
            return seen / (time.perf_counter() - started)
        finally:
            await c.stop()

    return asyncio.run(run())


def _bare_confluent(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bare-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
        }
    )
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        seen, started = 0, time.perf_counter()
        while seen < n:
            msgs = [m for m in c.consume(10_000, timeout=1.0) if not m.error()]
            vals = [msgpack.unpackb(m.value() or b"\xc0")["value"] for m in msgs]
            np.bincount(np.asarray(vals, dtype=np.int64), minlength=len(LABELS))
            seen += len(msgs)
        return seen / (time.perf_counter() - started)
    finally:
        c.close()


def _release_latencies(
    bootstrap: str, topic: str, slots: set[int], slot_s: float, timeout_s: float
) -> list[float]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"lat-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
        }
    )
    out: dict[int, float] = {}
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not slots <= set(out):
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            slot = msgpack.unpackb(m.value() or b"\xc0")["slot"]
            if slot in slots and slot not in out:
                out[slot] = time.time() - ((slot + 1) * slot_s + GRACE_S)
    finally:
        c.close()
    return sorted(out.values())


def run_throughput(args: argparse.Namespace) -> int:
    """Run the benchmark and print the figures; 0 if the target was reached, 1 otherwise."""
    broker = None if args.broker else EmbeddedBroker().start()
    bootstrap = args.broker or broker.bootstrap  # type: ignore[union-attr]
    work = tempfile.TemporaryDirectory(prefix="dpstream-bench-")
    worker: subprocess.Popen[bytes] | None = None
    try:
        prefix = f"bench-{secrets.token_hex(3)}."
        topics = load_topics(prefix)
        create_topics(topics, {"bootstrap.servers": bootstrap})
        first_slot = math.floor((time.time() + 25) / args.slot_s)
        rate = _produce(
            bootstrap, topics.events, args.events, args.users, first_slot, args.slots, args.slot_s
        )
        print(f"produced {args.events:,} events ({rate:,.0f}/s)")
        config = Path(work.name) / "streams.yaml"
        config.write_text(_streams_yaml(args.slot_s))
        port = free_port()
        env = {
            **os.environ,
            "DPSTREAM_BROKER": bootstrap,
            "DPSTREAM_CONFIG": str(config),
            "DPSTREAM_STATE_DIR": str(Path(work.name) / "state"),
            "DPSTREAM_METRICS_PORT": str(port),
            "DPSTREAM_METRICS_BIND": "127.0.0.1",
            "DPSTREAM_NOISE_KEY": secrets.token_hex(32),
            "DPSTREAM_TOPIC_PREFIX": prefix,
            "DPSTREAM_SESSION_TIMEOUT_S": "6",
            "DPSTREAM_LOG_LEVEL": "WARNING",
            # Synthetic data: the bench reads the exact event counter to time the ingest.
            "DPSTREAM_EXPOSE_DATA_COUNTS": "true",
        }
        worker = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "app.stream", "worker"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        first = last = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            n = _counted(port)
            now = time.perf_counter()
            if n > 0 and first is None:
                first = now
            if n >= args.events:
                last = now
                break
            time.sleep(0.05)
        if first is None or last is None or last <= first:
            print("worker did not count every event in time")
            return 1
        worker_rate = args.events / (last - first)
        print(
            f"worker ingest: {worker_rate:,.0f} events/s "
            f"({args.events:,} events in {last - first:.2f} s; target {TARGET_EVENTS_S:,})"
        )
        slots = set(range(first_slot, first_slot + args.slots))
        lat = _release_latencies(
            bootstrap,
            topics.releases,
            slots,
            args.slot_s,
            timeout_s=(first_slot + args.slots) * args.slot_s - time.time() + 30,
        )
        if lat:
            p50, p99 = np.percentile(lat, 50), np.percentile(lat, 99)
            print(
                f"slot close -> release at the consumer: p50 {p50:.3f} s, p99 {p99:.3f} s "
                f"over {len(lat)} slots"
            )
        if not args.skip_bare:
            aio = _bare_aiokafka(bootstrap, topics.events, args.events)
            ck = _bare_confluent(bootstrap, topics.events, args.events)
            print(
                f"bare aiokafka getmany+decode+bincount: {aio:,.0f} events/s "
                f"(worker/bare = {worker_rate / aio:.2f})"
            )
            print(
                f"bare confluent consume+decode+bincount: {ck:,.0f} events/s "
                f"(worker/bare = {worker_rate / ck:.2f})"
            )
        return 0 if worker_rate >= TARGET_EVENTS_S else 1
    finally:
        if worker is not None:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        if broker is not None:
            broker.stop()
        work.cleanup()
