"""``dpstream capacity recovery``: how fast releases come back after a ``kill -9`` of the worker.

Method (one broker: ``--broker``, else an embedded Tansu; the bench stream of
:mod:`app.tools.capacity.throughput`):

1. Start the only worker (session timeout 6 s) and wait until it is ready; a consumer reads
   ``releases`` from the start and notes when each slot's release arrives.
2. A producer process sends ``--rate`` events/s, stamped with the wall clock, for the whole run.
3. ``--kills N`` times, every ``--every-s`` seconds: ``SIGKILL`` the worker and start it again at
   once, as a supervisor would, with the same state folder and noise key.
4. Per kill, the **recovery time**: from the kill to the first release that arrives within
   :data:`BACK_WITHIN_SLOTS` slots of the wall clock (arrival minus the slot's due time, its end
   plus grace, at most that many slots). Issue 24's goal: at most ``max(30 s, 3 x session
   timeout)``. Over the storm, the **release delay** (arrival minus due time) of every slot
   that ended while the producer ran: p50 and max, and the slots never released.

Wall-clock figures: print them with the machine's load (a loaded machine stretches them).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from app.stream.broker import EmbeddedBroker
from app.stream.topics import TOPICS_DIR, create_topics, load_topics
from app.tools.capacity.fleet import (
    GRACE_S,
    SESSION_TIMEOUT_S,
    ReleaseWatch,
    machine,
    produce_part,
    spawn_worker,
    stop_workers,
    streams_yaml,
    wait_ready,
    worker_env,
)

BACK_WITHIN_SLOTS = 2
"""A worker has recovered once a release arrives at most this many slots after its due time."""


def recovery_times(
    kills: list[float], arrived: dict[int, float], slot_s: float, grace_s: float
) -> list[float | None]:
    """Per kill time, the seconds until the first release arriving after it within
    :data:`BACK_WITHIN_SLOTS` slots of its due time (None: no such release).

    >>> arrived = {10: 11.4, 11: 20.0, 12: 20.1, 13: 20.2, 19: 20.3}
    >>> recovery_times([12.0], arrived, slot_s=1.0, grace_s=0.3)
    [8.3]
    """
    out: list[float | None] = []
    for t in kills:
        back = [
            a
            for s, a in arrived.items()
            if a > t and a - ((s + 1) * slot_s + grace_s) <= BACK_WITHIN_SLOTS * slot_s
        ]
        out.append(round(min(back) - t, 6) if back else None)
    return out


def run_recovery(args: argparse.Namespace) -> int:
    """Run the benchmark and print the figures; 0 if every kill recovered, 1 otherwise."""
    broker = None if args.broker else EmbeddedBroker().start()
    bootstrap = args.broker or broker.bootstrap  # type: ignore[union-attr]
    work_dir = tempfile.TemporaryDirectory(prefix="dpstream-recovery-")
    work = Path(work_dir.name)
    workers: list[tuple[subprocess.Popen[bytes], int]] = []
    watch: ReleaseWatch | None = None
    producer: multiprocessing.process.BaseProcess | None = None
    try:
        prefix = f"recovery-{secrets.token_hex(3)}."
        topics = load_topics(prefix)
        create_topics(topics, {"bootstrap.servers": bootstrap})
        watch = ReleaseWatch(bootstrap, topics.releases)
        watch.start()
        config = work / "streams.yaml"
        config.write_text(streams_yaml(args.slot_s))
        env = worker_env(bootstrap, prefix, work, TOPICS_DIR, config, 0)
        workers = [spawn_worker(env, args.verbose)]
        print(f"machine: {machine()}; 1 worker, kill -9 every {args.every_s:g} s")
        if not wait_ready(workers, timeout_s=180):
            print("the worker did not become ready")
            return 1
        length = args.kills * args.every_s + args.tail_s
        ctx = multiprocessing.get_context("spawn")
        producer = ctx.Process(
            target=produce_part,
            args=(bootstrap, topics.events, int(args.rate * length), args.users, 0, args.rate, 1),
            daemon=True,
        )
        t_start = time.time()
        producer.start()
        kills: list[float] = []
        for _ in range(args.kills):
            time.sleep(max(0.0, t_start + (len(kills) + 1) * args.every_s - time.time()))
            proc = workers[0][0]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills.append(time.time())
            workers = [spawn_worker(env, args.verbose)]
        producer.join(timeout=length + 60)
        t_end = time.time()
        # The last slot due while the producer ran must have had its chance to arrive.
        deadline = time.monotonic() + max(30.0, 3 * SESSION_TIMEOUT_S) + 2 * args.slot_s
        ended = [
            s
            for s in range(int(t_start // args.slot_s) + 1, int(t_end // args.slot_s))
            if (s + 1) * args.slot_s <= t_end
        ]
        while time.monotonic() < deadline and not set(ended) <= set(watch.arrived):
            time.sleep(0.2)
        arrived = dict(watch.arrived)
        back = recovery_times(kills, arrived, args.slot_s, GRACE_S)
        delays = np.array(
            [arrived[s] - ((s + 1) * args.slot_s + GRACE_S) for s in ended if s in arrived]
        )
        goal = max(30.0, 3 * SESSION_TIMEOUT_S)
        shown = ", ".join("never" if b is None else f"{b:.1f}" for b in back)
        print(f"recovery after each kill -9 (s): {shown}; goal <= {goal:g} s")
        known = [b for b in back if b is not None]
        if known:
            print(
                f"recovery p50 {np.percentile(known, 50):.1f} s, max {max(known):.1f} s over "
                f"{len(known)} of {len(back)} kills"
            )
        if delays.size:
            print(
                f"release delay over the storm ({args.rate:,.0f} events/s, {args.slot_s:g} s "
                f"slots): p50 {np.percentile(delays, 50):.2f} s, max {delays.max():.2f} s; "
                f"{len(ended) - delays.size} of {len(ended)} slots not released; {machine()}"
            )
        return 0 if known and len(known) == len(back) and max(known) <= goal else 1
    finally:
        if watch is not None:
            watch.stop.set()
        if producer is not None and producer.is_alive():
            producer.terminate()
        stop_workers(workers)
        if broker is not None:
            broker.stop()
        work_dir.cleanup()
