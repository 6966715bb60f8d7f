"""``dpstream capacity throughput``: CPU per event of the worker against bare loops; latency.

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
   users (in turn, so ``min(events, users)`` distinct ones), stamped with the wall clock,
   *after* the workers are ready. The clock runs from the
   first send to the moment the workers' exact event counters (``/metrics``, data counts on)
   reach the total. **CPU per event** = (the workers' CPU over that interval minus the idle rate
   times its length) / events: robust on a shared machine, unlike events/s, which is bounded by
   whatever else runs on the cores (the producers and the broker here).
4. Latency: ``--rate`` events/s for ``--latency-s`` seconds; a consumer that has been reading
   ``releases`` since step 1 notes when each slot's release arrives; latency = arrival minus
   the slot's end + grace (p50/p99 over the slots that ended inside the paced phase).
5. Bare loops, the ceilings (:mod:`app.tools.capacity.bare`): K processes, each an aiokafka
   ``getmany`` (then a confluent-kafka ``consume``) + msgpack decode + ``bincount`` loop on its
   share of the partitions of the same topic (every event of steps 3-4), with their own CPU
   time (``time.process_time``) until their last record.
6. Memory: the workers' RSS growth over the run per distinct user, and the bytes an open slot
   costs per distinct user measured in process (:mod:`app.tools.capacity.memory`).

``--users`` takes a comma-separated sweep (``50000,200000,1000000``): steps 1-6 run once per
value, each on fresh topics and workers, and a table of the rows ends the output. Distinct
users *per slot* need a slot at least as long as the run (``--slot-s 600 --latency-s 0``);
with 1 s slots a slot holds what the producers send in a second.

The producers hold each batch open ``--linger-ms`` (100 ms by default, under the 0.3 s
grace). An event is stamped before that wait, and a slot closes once an event stamped past its
due time is read (or its partitions are found at their end), so the linger is part of the
latency. The embedded broker's
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
import math
import multiprocessing
import secrets
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.stream.broker import EmbeddedBroker
from app.stream.topics import TOPICS_DIR, create_topics, load_topics
from app.tools.capacity.bare import LOOPS, bare_loops
from app.tools.capacity.fleet import (
    GRACE_S,
    LINGER_MS,
    ReleaseWatch,
    RssWatch,
    assignments,
    counted,
    cpu_seconds,
    machine,
    produce_part,
    rss_mb,
    start_workers,
    stop_workers,
    topics_dir_for,
    until_counted,
    wait_ready,
    why_not_ready,
)
from app.tools.capacity.memory import slot_bytes_per_user

RSS_SAMPLES = 12
"""How many RSS samples the paced phase prints (memory flat in the stream's length)."""


@dataclass
class Row:
    """One point of the sweep (CPU in microseconds per event; NaN: not measured)."""

    users: int
    events: int
    worker_us: float = math.nan
    bare_us: dict[str, float] | None = None
    rss_bytes_per_user: float = math.nan
    slot_bytes_per_user: float = math.nan


def _produce(
    args: argparse.Namespace, bootstrap: str, topic: str, n: int, rate: float, users: int
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
                users,
                j * (users // jobs),
                rate / jobs,
                secrets.randbits(32),
                LINGER_MS if args.linger_ms is None else args.linger_ms,
            )
            for j, share in enumerate(shares)
        ]
        runs = [f.result() for f in futures]
    return min(r[0] for r in runs), sum(r[1] for r in runs)


def run_throughput(args: argparse.Namespace) -> int:
    """Run the benchmark (each ``--users`` value) and print the figures; 0 if every point
    completed, 1 otherwise."""
    broker = None if args.broker else EmbeddedBroker().start()
    bootstrap = args.broker or broker.bootstrap  # type: ignore[union-attr]
    rows: list[Row] = []
    try:
        for users in args.users:
            print(f"-- {users:,} users, {args.events:,} events")
            row = _run_point(args, bootstrap, users)
            if row is None:
                return 1
            rows.append(row)
    finally:
        if broker is not None:
            broker.stop()
    print(table(rows))
    return 0


def table(rows: list[Row]) -> str:
    """The sweep as a markdown table (ratios to each bare loop's CPU per event)."""
    clients = list(LOOPS)
    head = ["users", "events", "worker us/event"]
    head += [f"bare {c} us/event" for c in clients] + [f"ratio to {c}" for c in clients]
    head += ["RSS growth B/user", "open slot B/user"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        bare = r.bare_us or {}
        cells = [f"{r.users:,}", f"{r.events:,}", f"{r.worker_us:.2f}"]
        cells += [f"{bare.get(c, math.nan):.2f}" for c in clients]
        cells += [f"{r.worker_us / bare.get(c, math.nan):.2f}x" for c in clients]
        cells += [f"{r.rss_bytes_per_user:.1f}", f"{r.slot_bytes_per_user:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n{machine()}"


def _run_point(args: argparse.Namespace, bootstrap: str, users: int) -> Row | None:
    """Steps 1-6 of the module docstring for ``users``, on fresh topics and workers."""
    work_dir = tempfile.TemporaryDirectory(prefix="dpstream-capacity-")
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
            return None
        # 2. idle rate
        cpu0, t0 = sum(map(cpu_seconds, pids)), time.perf_counter()
        rss0 = [rss_mb(pid) for pid in pids]
        # Scraped as during the run, so the cost of serving /metrics counts as idle.
        until_counted(ports, math.inf, timeout_s=args.idle_s)
        idle_rate = (sum(map(cpu_seconds, pids)) - cpu0) / (time.perf_counter() - t0)
        # 3. throughput
        n = args.events
        assigned0 = assignments(ports)
        cpu0, t0 = sum(map(cpu_seconds, pids)), time.perf_counter()
        first, rate = _produce(args, bootstrap, topics.events, n, 0.0, users)
        t1 = until_counted(ports, n, timeout_s=args.timeout_s)
        rebalanced = assignments(ports) - assigned0
        if t1 is None:
            per_worker = ", ".join(f"{counted(port):,.0f}" for port in ports)
            dead = sum(counted(port, "dpstream_dead_letters_total") for port in ports)
            print(
                f"the workers did not count all {n:,} events in time (counted: {per_worker}; "
                f"dead letters: {dead:,.0f}; assignments meanwhile: {rebalanced:,.0f}; "
                f"not ready: {[why_not_ready(p) for p in ports]})"
            )
            if not args.skip_bare:  # how many the topic holds: lost by the worker or before?
                stop_workers(workers)
                workers.clear()
                bare_loops("aiokafka", args.workers, bootstrap, topics.events, partitions)
            return None
        # From t0, before the producers' start-up: the workers idled meanwhile.
        busy = sum(map(cpu_seconds, pids)) - cpu0 - idle_rate * (t1 - t0)
        worker_us = busy / n * 1e6
        rss_end = [rss_mb(pid) for pid in pids]
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
            _, paced = _produce(args, bootstrap, topics.events, m, args.rate, users)
            rss_watch.stop.set()
            t_end = time.time()
            print(
                f"paced phase: {m:,} events at {paced:,.0f}/s (asked {args.rate:,.0f}/s); "
                f"worker RSS MiB every {rss_watch.every_s:.0f} s: "
                + ", ".join(f"{x:.0f}" for x in rss_watch.samples)
            )
            n += m
            if until_counted(ports, n, timeout_s=args.timeout_s) is None:
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
        distinct = min(args.events, users)
        row = Row(users, args.events, worker_us)
        row.rss_bytes_per_user = (sum(rss_end) - sum(rss0)) * 2**20 / distinct
        # 5. bare loops on partition shares
        if not args.skip_bare:
            stop_workers(workers)
            workers.clear()
            row.bare_us = {}
            for client in LOOPS:
                _, bare_us = bare_loops(client, args.workers, bootstrap, topics.events, partitions)
                row.bare_us[client] = bare_us
                print(f"worker CPU per event / bare {client} loop's: {worker_us / bare_us:.2f}x")
        # 6. memory of an open slot, in process
        row.slot_bytes_per_user = slot_bytes_per_user(distinct)
        print(
            f"{distinct:,} distinct users: RSS growth {row.rss_bytes_per_user:.1f} bytes per "
            f"user over the throughput phase; an open slot {row.slot_bytes_per_user:.1f} bytes "
            "per user (tracemalloc)"
        )
        return row
    finally:
        if watch is not None:
            watch.stop.set()
        stop_workers(workers)
        work_dir.cleanup()
