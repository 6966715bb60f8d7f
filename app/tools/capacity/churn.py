"""``dpstream capacity churn``: every event counted while the group's members come and go.

Method (one broker: ``--broker``, else an embedded Tansu; the bench stream of
:mod:`app.tools.capacity.fleet` on ``--partitions P`` events partitions):

1. Start ``--workers K`` workers in one collect group and wait until every one is ready.
2. One producer process sends ``--events`` events for ``--users`` users at ``--rate`` events/s,
   stamped with the wall clock.
3. Meanwhile, every ``--every-s`` seconds, the next of three membership changes, in turn: a new
   worker **joins**; the oldest worker **leaves** (``SIGTERM``, a clean shutdown); a worker
   **times out** (``SIGSTOP`` for the session timeout plus 3 s, so the group evicts it, then
   ``SIGCONT``: it comes back as a zombie that must find it was fenced and rejoin). At least two
   workers stay up.
4. Once the producer is done: wait until the collect group's committed offsets reach the
   records sent (every record passed by a commit) and the last slot is released, then run
   ``dpstream verify`` over the topics.

Counted == sent when: the committed offsets sum to the records sent; no worker counted a record
lost unseen (``dpstream_records_unaccounted_total`` with reason ``gap_taken`` or ``uncounted``,
scraped from each worker before it leaves and at the end); and ``verify`` finds no violation
and no value ``dropped`` (every value of the events topic reached a release, or is accounted as
a duplicate, late, or a level change). The exact event counters sum to more than the records
sent when partitions moved: the new owner counts again what it replays from the last commit
(its partials for slots already released are ignored by the release agent).

Exit status 0 when counted == sent, 1 otherwise.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import secrets
import signal
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from app.stream.broker import EmbeddedBroker
from app.stream.config import load_settings
from app.stream.topics import create_topics, load_topics
from app.tools.capacity.fleet import (
    SESSION_TIMEOUT_S,
    ReleaseWatch,
    counted,
    machine,
    produce_part,
    spawn_worker,
    stop_workers,
    streams_yaml,
    topics_dir_for,
    wait_ready,
    worker_env,
)
from app.utc import utc_time

LOST = ("gap_taken", "uncounted")
"""``dpstream_records_unaccounted`` reasons that mean a record lost unseen (the others are
records read again)."""
PAUSE_S = SESSION_TIMEOUT_S + 3.0
"""How long a timed-out worker stays stopped (past its session timeout)."""
MIN_UP = 2
"""Workers that stay up whatever the churn."""


def committed_total(bootstrap: str, topic: str, group: str) -> int:
    """The sum of ``group``'s committed offsets over ``topic``'s partitions."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        found = c.committed([TopicPartition(topic, p) for p in parts], timeout=10)
        return sum(max(tp.offset, 0) for tp in found)
    finally:
        c.close()


def _lost(port: int) -> float:
    """Records a worker counted as lost unseen so far (-1: it did not answer)."""
    total = 0.0
    for reason in LOST:
        found = counted(port, "dpstream_records_unaccounted_total", f'reason="{reason}"')
        if found < 0:
            return -1.0
        total += found
    return total


class Fleet:
    """The group's workers and the churn applied to them."""

    def __init__(self, args: argparse.Namespace, bootstrap: str, prefix: str, work: Path) -> None:
        self.args, self.bootstrap, self.prefix, self.work = args, bootstrap, prefix, work
        self.topics_dir = topics_dir_for(args.partitions, work / "topics")
        self.config = work / "streams.yaml"
        self.config.write_text(streams_yaml(args.slot_s))
        self.up: list[tuple[subprocess.Popen[bytes], int]] = []
        self.started = 0
        self.lost = 0.0
        self.log: list[str] = []

    def join(self) -> None:
        env = worker_env(
            self.bootstrap, self.prefix, self.work, self.topics_dir, self.config, self.started
        )
        self.up.append(spawn_worker(env, self.args.verbose))
        self.started += 1

    def leave(self) -> None:
        proc, port = self.up.pop(0)
        self.lost += max(0.0, _lost(port))  # scraped last: nothing is counted after SIGTERM
        stop_workers([(proc, port)])

    def time_out(self, k: int) -> None:
        proc, _ = self.up[k]
        proc.send_signal(signal.SIGSTOP)
        time.sleep(PAUSE_S)
        proc.send_signal(signal.SIGCONT)

    def churn(self, done: threading.Event) -> None:
        """Apply join, leave, time out in turn every ``--every-s`` until ``done``."""
        step = 0
        while not done.wait(self.args.every_s):
            kind = ("join", "leave", "timeout")[step % 3]
            step += 1
            if kind == "join":
                self.join()
            elif len(self.up) <= MIN_UP:
                continue
            elif kind == "leave":
                self.leave()
            else:
                self.time_out(step % len(self.up))
            self.log.append(f"{utc_time(time.time())} {kind} ({len(self.up)} up)")


def run_churn(args: argparse.Namespace) -> int:
    """Run the benchmark and print the figures; 0 if counted == sent."""
    from app.verify import verify
    from app.verify.report import to_text

    broker = None if args.broker else EmbeddedBroker().start()
    bootstrap = args.broker or broker.bootstrap  # type: ignore[union-attr]
    work_dir = tempfile.TemporaryDirectory(prefix="dpstream-churn-")
    work = Path(work_dir.name)
    prefix = f"churn-{secrets.token_hex(3)}."
    fleet = Fleet(args, bootstrap, prefix, work)
    watch: ReleaseWatch | None = None
    try:
        topics = load_topics(prefix, fleet.topics_dir)
        create_topics(topics, {"bootstrap.servers": bootstrap})
        watch = ReleaseWatch(bootstrap, topics.releases)
        watch.start()
        for _ in range(args.workers):
            fleet.join()
        print(f"machine: {machine()}; {args.workers} worker(s), {args.partitions} partitions")
        if not wait_ready(fleet.up, timeout_s=300):
            print("the workers did not all become ready")
            return 1
        done = threading.Event()
        churner = threading.Thread(target=fleet.churn, args=(done,), daemon=True)
        t0 = time.monotonic()
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            job = pool.submit(
                produce_part,
                bootstrap,
                topics.events,
                args.events,
                args.users,
                0,
                args.rate,
                secrets.randbits(32),
            )
            churner.start()
            _, rate = job.result()
        done.set()
        churner.join()
        print(f"sent {args.events:,} events at {rate:,.0f}/s in {time.monotonic() - t0:.0f} s")
        print("membership changes: " + "; ".join(fleet.log))
        group = f"{prefix}dpstream-collect"
        deadline = time.monotonic() + 300
        committed = committed_total(bootstrap, topics.events, group)
        while committed < args.events and time.monotonic() < deadline:
            time.sleep(1)
            committed = committed_total(bootstrap, topics.events, group)
        last = math.floor(time.time() / args.slot_s)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and max(watch.arrived, default=-1) < last:
            time.sleep(0.5)
        ports = [port for _, port in fleet.up]
        outcomes = sum(max(0.0, counted(port)) for port in ports)
        lost = fleet.lost + sum(max(0.0, _lost(port)) for port in ports)
        stop_workers(fleet.up)
        fleet.up = []
        env = {"DPSTREAM_BROKER": bootstrap, "DPSTREAM_TOPIC_PREFIX": prefix}
        verdict = verify(load_settings(env, config=fleet.config), "bench", idle_s=2.0, max_s=600)
        print(to_text(verdict))
        dropped = verdict.not_released.get("dropped", 0)
        print(
            f"sent {args.events:,}; committed {committed:,}; lost unseen {lost:,.0f}; verify "
            f"{'clean' if verdict.ok else 'FOUND VIOLATIONS'}, dropped {dropped:,}; outcomes "
            f"counted by the workers up at the end: {outcomes:,.0f}; {machine()}"
        )
        ok = committed == args.events and lost == 0 and verdict.ok and dropped == 0
        print("counted == sent" if ok else "counted != sent")
        return 0 if ok else 1
    finally:
        if watch is not None:
            watch.stop.set()
        stop_workers(fleet.up)
        if broker is not None:
            broker.stop()
        work_dir.cleanup()
