"""``dpstream bench throughput``: CPU per event of the worker against bare loops; latency.

Method (one broker: ``$DPSTREAM_BROKER`` or ``--broker``, else an embedded Tansu):

1. Create a fresh set of topics (unique prefix; ``--partitions P`` rewrites the ``events``,
   ``preferences`` and ``levels`` specs into a temporary ``$DPSTREAM_TOPICS_DIR``) and start
   ``--workers K`` ``dpstream worker`` processes in one group (wall clock, PBA, two levels,
   d = 10). Wait until every ``/readyz`` has answered 200 for a while (all K hold partitions
   and have caught up).
2. Idle rate: each worker's CPU time (user + system of the process and all its threads, from
   ``/proc/<pid>/stat``) over ``--idle-s`` seconds of no input, with ``/metrics`` scraped every
   200 ms as in step 3.
3. Throughput: ``--producers J`` processes produce ``--events`` msgpack events for ``--users``
   users, stamped with the wall clock, *after* the workers are ready. The clock runs from the
   first send to the moment the workers' exact event counters (``/metrics``, data counts on)
   reach the total. **CPU per event** = (the workers' CPU over that interval minus the idle rate
   times its length) / events: robust on a shared machine, unlike events/s, which is bounded by
   whatever else runs on the cores (the producers and the broker here).
4. Latency: ``--rate`` events/s for ``--latency-s`` seconds; a consumer that has been reading
   ``releases`` since step 1 notes when each slot's release arrives; latency = arrival minus
   the slot's end + grace (p50/p99 over the slots that ended inside the paced phase).
5. Bare loops, the ceiling: K processes, each an aiokafka ``getmany`` + batch decode
   (:func:`app.wire.events.decode_batch`) + ``bincount`` loop on its share of the partitions
   of the same topic (every event of steps 3-4), with their own CPU time
   (``time.process_time``) until their last record.

The producers hold each batch open ``--linger-ms`` (20 ms by default). An event is stamped
before that wait, and a slot closes once an event stamped past its due time is read (or its
partitions are found at their end), so the linger is part of the latency. The embedded broker's
fetches cost more with every batch a partition holds: librdkafka's 5 ms gained 5-10 ms of p50
over 4 partitions but lost 90-110 ms over 16 on the 2-core VM, and a long paced phase needs
fewer, larger batches still (at 1,000 events/s, 20 ms took Tansu from 17 % to 99 % of a core
within 5 minutes; with ``--linger-ms 200`` it went from 10 % to 55 % over an hour).

Every figure is printed with the machine's core count and load average: wall-clock figures
from a machine shared with the broker and the producers say little; CPU per event is the figure
to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from app.stream.broker import EmbeddedBroker, free_port
from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.topics import TOPICS_DIR, create_topics, load_topics
from app.wire import events
from app.wire.releases import decode as decode_release

GRACE_S = 0.3
LABELS = [f"c{i}" for i in range(10)]
READY_HOLD_S = 3.0
"""Every worker must answer ``/readyz`` 200 this long in a row before events are produced."""
CO_PARTITIONED = ("events", "preferences", "levels")
"""The topic specs ``--partitions`` rewrites (a user's records share one partition number)."""
SCRAPE_S = 0.2
"""How often the bench reads the workers' counters (each read costs the worker CPU)."""
SESSION_TIMEOUT_S = 6.0
"""The bench workers' consumer session timeout (a dead member leaves the group after it)."""
RSS_SAMPLES = 12
"""How many RSS samples the paced phase prints (memory flat in the stream's length)."""
LINGER_MS = 20.0
"""The producers' ``linger.ms`` unless ``--linger-ms`` says otherwise."""
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def streams_yaml(slot_s: float) -> str:
    return (
        "streams:\n  - id: bench\n"
        f"    labels: {LABELS}\n    slot_s: {slot_s}\n    grace_s: {GRACE_S}\n"
        "    clock: wall\n    release_timeout_s: 2.0\n"
        "    mechanism: {name: pba}\n"
        "    levels:\n      - {name: strict, w: 20, eps: 1.0}\n"
        "      - {name: relaxed, w: 10, eps: 2.0}\n"
    )


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` and all its threads (``/proc/<pid>/stat``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 is fields[0]
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid`` in MiB (``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def machine() -> str:
    """Cores and load average, printed beside every figure."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores, load average {load}"


def produce_part(
    bootstrap: str,
    topic: str,
    n: int,
    users: int,
    first_user: int,
    rate: float,
    seed: int,
    linger_ms: float = LINGER_MS,
) -> tuple[float, float]:
    """Produce ``n`` events stamped with the wall clock (``rate`` > 0: paced): the
    ``time.perf_counter()`` of the first send (system-wide on Linux) and the events/s.

    ``linger_ms`` is how long the producer holds a batch open: an event is stamped before it,
    so a slot's close waits for it too (the service closes a slot once it reads an event
    stamped past the slot's due time, or finds its partitions at their end)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": linger_ms,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000,
            **PRODUCER_CONFIG,
        }
    )
    failed: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    values = np.random.default_rng(seed).integers(0, len(LABELS), n).tolist()
    names = [f"u{(first_user + i) % users}" for i in range(min(n, users))]
    keys = [name.encode() for name in names]
    encode, produce, poll = events.encode, producer.produce, producer.poll
    started = time.perf_counter()
    chunk = 1000 if rate <= 0 else max(1, int(rate / 100))
    for lo in range(0, n, chunk):
        if rate > 0:
            ahead = started + lo / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
        ts = time.time()
        for i in range(lo, min(n, lo + chunk)):
            j = i % len(names)
            event = events.Event("bench", names[j], ts, values[i])
            while True:
                try:
                    produce(topic, key=keys[j], value=encode(event), on_delivery=delivered)
                    break
                except BufferError:
                    poll(0.05)
        poll(0)
    left = producer.flush(60)
    if failed or left:
        print(
            f"{len(failed):,} of {n:,} events not delivered ({left:,} still queued); first: "
            f"{failed[:1]}",
            file=sys.stderr,
        )
    return started, n / (time.perf_counter() - started)


def _produce(
    args: argparse.Namespace, bootstrap: str, topic: str, n: int, rate: float
) -> tuple[float, float]:
    """Produce ``n`` events from ``--producers`` processes: the first send's
    ``time.perf_counter()`` and the total events/s (each process timed from its first send)."""
    jobs = max(1, args.producers)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        shares = [n // jobs + (1 if j < n % jobs else 0) for j in range(jobs)]
        futures = [
            pool.submit(
                produce_part,
                bootstrap,
                topic,
                share,
                args.users,
                j * (args.users // jobs),
                rate / jobs,
                secrets.randbits(32),
                LINGER_MS if args.linger_ms is None else args.linger_ms,
            )
            for j, share in enumerate(shares)
        ]
        runs = [f.result() for f in futures]
    return min(r[0] for r in runs), sum(r[1] for r in runs)


def _counted(port: int, metric: str = "dpstream_events_total") -> float:
    """The sum of a worker's ``metric`` series (by default the exact event counter, every
    outcome), or -1 when it does not answer."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback only
            text = r.read().decode()
    except OSError:
        return -1.0
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith(metric + "{")
    )


def _assignments(ports: list[int]) -> float:
    """The partition assignments the workers' ingests received so far (rebalances)."""
    return sum(max(0.0, _counted(port, "dpstream_assignments_total")) for port in ports)


def _ready(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback only
            return bool(r.status == 200)
    except OSError:
        return False


def _bare_aiokafka(bootstrap: str, topic: str, partitions: list[int]) -> tuple[int, float, float]:
    """One bare loop on ``partitions``: (events, CPU seconds, wall seconds) to its last record.

    It stops after 2 s without records (Tansu's end offsets are not exact)."""
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
            domains = {"bench": events.Domain(len(LABELS), {x: i for i, x in enumerate(LABELS)})}
            seen, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
            cpu, wall, quiet_since = cpu0, wall0, time.monotonic()
            while time.monotonic() - quiet_since < 2.0:
                batches = await c.getmany(timeout_ms=200, max_records=20_000)
                for records in batches.values():
                    vals = events.decode_batch([r.value for r in records], domains).values
                    np.bincount(np.asarray(vals, dtype=np.int64), minlength=len(LABELS))
                    seen += len(records)
                if batches:
                    cpu, wall = time.process_time(), time.perf_counter()
                    quiet_since = time.monotonic()
            return seen, cpu - cpu0, wall - wall0
        finally:
            await c.stop()

    return asyncio.run(run())


class RssWatch(threading.Thread):
    """Samples the workers' summed RSS (MiB) every ``every_s`` seconds until ``stop``."""

    def __init__(self, pids: list[int], every_s: float) -> None:
        super().__init__(daemon=True)
        self.pids, self.every_s = pids, every_s
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            self.samples.append(sum(rss_mb(pid) for pid in self.pids))


class ReleaseWatch(threading.Thread):
    """Reads ``releases`` from the start and notes when each slot's release first arrives."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.arrived: dict[int, float] = {}
        self.computed: dict[int, float] = {}
        """Per slot, the release's ``released_at`` (when the worker computed it)."""
        self.stop = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.auto.commit": False,
                "group.id": f"lat-{secrets.token_hex(4)}",
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            meta = c.list_topics(self.topic, timeout=10).topics[self.topic]
            c.assign([TopicPartition(self.topic, p, 0) for p in meta.partitions])
            while not self.stop.is_set():
                m = c.poll(0.05)
                if m is None or m.error():
                    continue
                release = decode_release(m.value())
                self.arrived.setdefault(release.slot, time.time())
                self.computed.setdefault(release.slot, release.released_at or 0.0)
        finally:
            c.close()


def topics_dir_for(partitions: int, into: Path) -> Path:
    """A copy of ``topics/`` with the co-partitioned topics at ``partitions``."""
    into.mkdir()
    for spec in TOPICS_DIR.glob("*.yaml"):
        text = spec.read_text()
        if spec.stem in CO_PARTITIONED:
            lines = [
                f"partitions: {partitions}" if line.startswith("partitions:") else line
                for line in text.splitlines()
            ]
            text = "\n".join(lines) + "\n"
        (into / spec.name).write_text(text)
    return into


def worker_env(
    bootstrap: str, prefix: str, work: Path, topics_dir: Path, config: Path, k: int
) -> dict[str, str]:
    """The environment of bench worker ``k`` (its own state folder and metrics port)."""
    return {
        **os.environ,
        "DPSTREAM_BROKER": bootstrap,
        "DPSTREAM_CONFIG": str(config),
        "DPSTREAM_TOPICS_DIR": str(topics_dir),
        "DPSTREAM_STATE_DIR": str(work / f"state-{k}"),
        "DPSTREAM_METRICS_PORT": str(free_port()),
        "DPSTREAM_METRICS_BIND": "127.0.0.1",
        "DPSTREAM_NOISE_KEY": secrets.token_hex(32),
        "DPSTREAM_DEPLOYMENT": prefix.strip(".") or "bench",  # one per bench run
        "DPSTREAM_TOPIC_PREFIX": prefix,
        "DPSTREAM_SESSION_TIMEOUT_S": f"{SESSION_TIMEOUT_S:g}",
        "DPSTREAM_LOG_LEVEL": "WARNING",
        # Synthetic data: the bench reads the exact event counter.
        "DPSTREAM_EXPOSE_DATA_COUNTS": "true",
    }


def spawn_worker(env: dict[str, str], verbose: bool) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``dpstream worker`` with ``env``; the process and its metrics port."""
    proc = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "app.stream", "worker"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=None if verbose else subprocess.DEVNULL,
    )
    return proc, int(env["DPSTREAM_METRICS_PORT"])


def start_workers(
    args: argparse.Namespace, bootstrap: str, prefix: str, work: Path, topics_dir: Path
) -> list[tuple[subprocess.Popen[bytes], int]]:
    """``--workers K`` workers in one group, on the bench stream (``--slot-s``)."""
    config = work / "streams.yaml"
    config.write_text(streams_yaml(args.slot_s))
    return [
        spawn_worker(worker_env(bootstrap, prefix, work, topics_dir, config, k), args.verbose)
        for k in range(args.workers)
    ]


def wait_ready(workers: list[tuple[subprocess.Popen[bytes], int]], timeout_s: float) -> bool:
    deadline, since = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p, _ in workers):
            return False
        if all(_ready(port) for _, port in workers):
            since = since or time.monotonic()
            if time.monotonic() - since >= READY_HOLD_S:
                return True
        else:
            since = None
        time.sleep(0.2)
    return False


def _until_counted(ports: list[int], total: float, timeout_s: float) -> float | None:
    """Wait until the workers' counters sum to ``total``; the perf_counter time, or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(max(0.0, _counted(port)) for port in ports) >= total:
            return time.perf_counter()
        time.sleep(SCRAPE_S)
    return None


def _why_not_ready(port: int) -> str:
    """A worker's ``/readyz`` answer: "" when ready, else its reasons."""
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback only
            return ""
    except urllib.error.HTTPError as exc:
        return exc.read().decode(errors="replace")[:200]
    except OSError as exc:
        return repr(exc)


def _bare_loops(
    args: argparse.Namespace, bootstrap: str, topic: str, partitions: int
) -> tuple[int, float]:
    """K bare loops on partition shares of ``topic``: print and return (events seen, CPU
    microseconds per event)."""
    shares = [[p for p in range(partitions) if p % args.workers == k] for k in range(args.workers)]
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(len(shares), mp_context=ctx) as pool:
        runs = list(
            pool.map(_bare_aiokafka, [bootstrap] * len(shares), [topic] * len(shares), shares)
        )
    seen = sum(r[0] for r in runs)
    bare_us = sum(r[1] for r in runs) / max(1, seen) * 1e6
    wall = max(r[2] for r in runs)
    print(
        f"{len(shares)} bare aiokafka loop(s), getmany + decode_batch + bincount: "
        f"{seen / wall:,.0f} events/s wall ({seen:,} events); CPU {bare_us:.2f} us/event; "
        f"{machine()}"
    )
    return seen, bare_us


def run_throughput(args: argparse.Namespace) -> int:
    """Run the benchmark and print the figures; 0 if it completed, 1 otherwise."""
    broker = None if args.broker else EmbeddedBroker().start()
    bootstrap = args.broker or broker.bootstrap  # type: ignore[union-attr]
    work_dir = tempfile.TemporaryDirectory(prefix="dpstream-bench-")
    work = Path(work_dir.name)
    workers: list[tuple[subprocess.Popen[bytes], int]] = []
    watch: ReleaseWatch | None = None
    try:
        prefix = f"bench-{secrets.token_hex(3)}."
        topics_dir = topics_dir_for(args.partitions, work / "topics") if args.partitions else None
        topics = load_topics(prefix, topics_dir)
        partitions = topics.spec("events").partitions
        create_topics(topics, {"bootstrap.servers": bootstrap})
        watch = ReleaseWatch(bootstrap, topics.releases)
        watch.start()
        workers = start_workers(args, bootstrap, prefix, work, topics_dir or TOPICS_DIR)
        pids, ports = [p.pid for p, _ in workers], [port for _, port in workers]
        print(f"machine: {machine()}; {args.workers} worker(s), {partitions} partitions")
        if not wait_ready(workers, timeout_s=180):
            print("the workers did not all become ready")
            return 1
        # 2. idle rate
        cpu0, t0 = sum(map(cpu_seconds, pids)), time.perf_counter()
        rss0 = [rss_mb(pid) for pid in pids]
        # Scraped as during the run, so the cost of serving /metrics counts as idle.
        _until_counted(ports, math.inf, timeout_s=args.idle_s)
        idle_rate = (sum(map(cpu_seconds, pids)) - cpu0) / (time.perf_counter() - t0)
        # 3. throughput
        n = args.events
        assigned0 = _assignments(ports)
        cpu0, t0 = sum(map(cpu_seconds, pids)), time.perf_counter()
        first, rate = _produce(args, bootstrap, topics.events, n, rate=0.0)
        t1 = _until_counted(ports, n, timeout_s=args.timeout_s)
        rebalanced = _assignments(ports) - assigned0
        if t1 is None:
            counted = ", ".join(f"{_counted(port):,.0f}" for port in ports)
            dead = sum(_counted(port, "dpstream_dead_letters_total") for port in ports)
            print(
                f"the workers did not count all {n:,} events in time (counted: {counted}; "
                f"dead letters: {dead:,.0f}; assignments meanwhile: {rebalanced:,.0f}; "
                f"not ready: {[_why_not_ready(p) for p in ports]})"
            )
            if not args.skip_bare:  # how many the topic holds: lost by the worker or before?
                stop_workers(workers)
                workers = []
                _bare_loops(args, bootstrap, topics.events, partitions)
            return 1
        # From t0, before the producers' start-up: the workers idled meanwhile.
        busy = sum(map(cpu_seconds, pids)) - cpu0 - idle_rate * (t1 - t0)
        worker_us = busy / n * 1e6
        print(f"produced {n:,} events from {args.producers} process(es) at {rate:,.0f}/s")
        print(
            f"workers: {n / (t1 - first):,.0f} events/s wall ({n:,} in {t1 - first:.2f} s from "
            f"the first send); CPU {worker_us:.2f} us/event (idle {idle_rate * 100:.1f}% of a core "
            f"subtracted); {machine()}"
        )
        if rebalanced:  # the partitions moved: replayed records were counted twice
            print(f"the group rebalanced meanwhile: {rebalanced:,.0f} assignments")
        # 4. latency at a paced rate
        lat: list[float] = []
        if args.latency_s > 0:
            t_start = time.time()
            m = int(args.rate * args.latency_s)
            rss_watch = RssWatch(pids, every_s=max(1.0, args.latency_s / RSS_SAMPLES))
            rss_watch.start()
            _, paced = _produce(args, bootstrap, topics.events, m, rate=args.rate)
            rss_watch.stop.set()
            t_end = time.time()
            print(
                f"paced phase: {m:,} events at {paced:,.0f}/s (asked {args.rate:,.0f}/s); "
                f"worker RSS MiB every {rss_watch.every_s:.0f} s: "
                + ", ".join(f"{x:.0f}" for x in rss_watch.samples)
            )
            n += m
            if _until_counted(ports, n, timeout_s=args.timeout_s) is None:
                print(f"the workers did not count all {n:,} events in time")
            ended = [
                s
                for s in range(math.ceil(t_start / args.slot_s), int(t_end / args.slot_s))
                if (s + 1) * args.slot_s <= t_end
            ]
            deadline = time.monotonic() + 10 + 3 * args.slot_s
            while time.monotonic() < deadline and not set(ended) <= set(watch.arrived):
                time.sleep(0.1)
            lat = sorted(
                watch.arrived[s] - ((s + 1) * args.slot_s + GRACE_S)
                for s in ended
                if s in watch.arrived
            )
            if lat:
                got = [s for s in ended if s in watch.arrived]
                computed = [watch.computed[s] - ((s + 1) * args.slot_s + GRACE_S) for s in got]
                print(
                    f"slot close -> release at a consumer, {paced:,.0f} events/s: "
                    f"p50 {np.percentile(lat, 50):.3f} s, p99 {np.percentile(lat, 99):.3f} s, "
                    f"max {lat[-1]:.3f} s over {len(lat)} of {len(ended)} slots (of which "
                    f"slot close -> computed: p50 {np.percentile(computed, 50):.3f} s, "
                    f"p99 {np.percentile(computed, 99):.3f} s); {machine()}"
                )
            else:
                print(f"no release arrived for the {len(ended)} slots of the paced phase")
        rss = [rss_mb(pid) for pid in pids]
        grew = ", ".join(f"{a:.0f} -> {b:.0f}" for a, b in zip(rss0, rss, strict=True))
        print(f"worker RSS MiB (ready -> end): {grew}")
        # 5. bare loops on partition shares
        if not args.skip_bare:
            stop_workers(workers)
            workers = []
            _, bare_us = _bare_loops(args, bootstrap, topics.events, partitions)
            print(f"worker CPU per event / bare loop's: {worker_us / bare_us:.2f}x")
        return 0
    finally:
        if watch is not None:
            watch.stop.set()
        stop_workers(workers)
        if broker is not None:
            broker.stop()
        work_dir.cleanup()


def stop_workers(workers: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    for proc, _ in workers:
        proc.terminate()
    for proc, _ in workers:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
