"""What the capacity tools share: the bench stream, a fleet of ``dpstream worker`` processes
on a broker, their CPU, RSS and counters, a producer of synthetic events, the releases watcher.

Every figure is printed with :func:`machine` (cores and load average): wall-clock figures from a
machine shared with the broker and the producers say little; CPU per event is the one to compare.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

from app.stream.broker import free_port
from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.topics import TOPICS_DIR
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


LINGER_MS = 100.0
"""The producers' ``linger.ms`` unless ``--linger-ms`` says otherwise: under :data:`GRACE_S`,
so it does not delay a slot's close, and long enough that the embedded broker takes few
batches per partition (at 20 ms, 0.40-0.50 of a core over 16 partitions; at 100 ms, 0.17-0.21;
docs/capacity.md)."""


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


def counted(port: int, metric: str = "dpstream_events_total", having: str = "") -> float:
    """The sum of a worker's ``metric`` series (by default the exact event counter, every
    outcome) whose labels contain ``having``, or -1 when it does not answer."""
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback only
            text = r.read().decode()
    except OSError:
        return -1.0
    return sum(
        float(line.rpartition(" ")[2])
        for line in text.splitlines()
        if line.startswith(metric + "{") and having in line
    )


def assignments(ports: list[int]) -> float:
    """The partition assignments the workers' ingests received so far (rebalances)."""
    return sum(max(0.0, counted(port, "dpstream_assignments_total")) for port in ports)


def ready(port: int) -> bool:
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=1) as r:  # noqa: S310 - loopback only
            return bool(r.status == 200)
    except OSError:
        return False


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
        if all(ready(port) for _, port in workers):
            since = since or time.monotonic()
            if time.monotonic() - since >= READY_HOLD_S:
                return True
        else:
            since = None
        time.sleep(0.2)
    return False


def until_counted(ports: list[int], total: float, timeout_s: float) -> float | None:
    """Wait until the workers' counters sum to ``total``; the perf_counter time, or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sum(max(0.0, counted(port)) for port in ports) >= total:
            return time.perf_counter()
        time.sleep(SCRAPE_S)
    return None


def why_not_ready(port: int) -> str:
    """A worker's ``/readyz`` answer: "" when ready, else its reasons."""
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - loopback only
            return ""
    except urllib.error.HTTPError as exc:
        return exc.read().decode(errors="replace")[:200]
    except OSError as exc:
        return repr(exc)


def stop_workers(workers: list[tuple[subprocess.Popen[bytes], int]]) -> None:
    for proc, _ in workers:
        proc.terminate()
    for proc, _ in workers:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
