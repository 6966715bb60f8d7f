"""Where the time between a slot's due time and its release goes (issue 37, goal 4).

Usage: ``.venv/bin/python scripts/release_path.py [--partitions 16] [--producers 2]
[--rate 50000] [--latency-s 20] [--linger-ms 100] [--grace-s 0.3]``

Starts an embedded Tansu broker and ``dpstream capacity throughput --broker ... --skip-bare``
on it (1 worker, 1 s slots, the bench's grace of 0.3 s); beside it a watcher (its own consumer,
10 ms fetch waits) reads the bench's internal ``partials`` topic and its ``releases``, and notes
per slot when each partition's partial and the release arrived. For the slots released during
the paced phase it prints, p50 and p99 over slots, from the slot's due time (end + grace):

- ``first partial`` / ``last partial``: the first and the last of the slot's partials seen on
  ``partials`` (the ingest closed the slot in that partition and sent its counts: the
  producers' linger, the ingest's fetch wait and flush, one produce);
- ``last partial -> computed``: until the release's ``released_at`` (the release agent's fetch
  wait, the slot protocol, the changelog write, the mechanism's step);
- ``computed -> read``: until the watcher read the release (one produce, one fetch);
- ``due -> read``: the whole.

The watcher's own fetch adds up to 10 ms to each arrival. The bench's own figures are printed
as they come, and the broker's CPU (cores) over the paced phase.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgpack
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Watch(threading.Thread):
    """Arrival times of each slot's partials (per partition) and of its release."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.partials: dict[int, dict[int, float]] = {}
        self.released: dict[int, tuple[float, float, float]] = {}
        """slot -> (slot end, released_at, read at)."""

    def _topics(self, consumer: object) -> tuple[str, str]:
        while not self.stop.is_set():
            names = consumer.list_topics(timeout=10).topics  # type: ignore[attr-defined]
            found = {
                m.group(1): n for n in names if (m := re.match(r"bench-.*?(partials|releases)$", n))
            }
            if "partials" in found and "releases" in found:
                return found["partials"], found["releases"]
            time.sleep(0.5)
        raise SystemExit(0)

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "release-path",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        partials, releases = self._topics(c)
        meta = c.list_topics(timeout=10).topics
        c.assign(
            [TopicPartition(t, p, 0) for t in (partials, releases) for p in meta[t].partitions]
        )
        while not self.stop.is_set():
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            seen = time.time()
            value = msgpack.unpackb(m.value() or b"\xc0", strict_map_key=False)
            if not isinstance(value, dict):
                continue
            if m.topic() == partials and value.get("kind") == "partial":
                self.partials.setdefault(value["slot"], {}).setdefault(value["partition"], seen)
            elif m.topic() == releases and "released_at" in value:
                self.released.setdefault(
                    value["slot"], (float(value["end"]), float(value["released_at"]), seen)
                )
        c.close()


def pct(values: list[float]) -> str:
    if not values:
        return "-"
    a = np.array(values) * 1000
    return f"p50 {np.percentile(a, 50):6.1f} ms, p99 {np.percentile(a, 99):6.1f} ms"


def main() -> int:
    from app.stream.broker import EmbeddedBroker
    from app.tools.capacity.fleet import GRACE_S, LINGER_MS

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--rate", type=float, default=50_000)
    ap.add_argument("--latency-s", type=float, default=20)
    ap.add_argument("--linger-ms", type=float, default=LINGER_MS, help="the bench's default")
    ap.add_argument("--grace-s", type=float, default=GRACE_S, help="the bench's grace")
    args = ap.parse_args()
    with EmbeddedBroker() as broker:
        watch = Watch(broker.bootstrap)
        watch.start()
        bench = [
            str(Path(sys.executable).with_name("dpstream")),
            "capacity",
            "throughput",
            "--broker",
            broker.bootstrap,
            "--partitions",
            str(args.partitions),
            "--producers",
            str(args.producers),
            "--rate",
            str(args.rate),
            "--latency-s",
            str(args.latency_s),
            "--linger-ms",
            str(args.linger_ms),
            "--events",
            str(int(args.rate * 2)),
            "--skip-bare",
        ]
        # The paced phase starts once the bench printed its throughput line ("produced N
        # events ...") and ends when it prints the paced phase's figures.
        phase = [float("inf"), float("inf")]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # its lines as they come
        proc = subprocess.Popen(  # noqa: S603
            bench, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        busy = [0.0, 0.0]
        for line in proc.stdout:
            print(line, end="", flush=True)
            if line.startswith("produced "):
                phase[0], busy[0] = time.time(), cpu_s(broker.pid)
            elif "paced phase" in line and phase[1] == float("inf"):
                phase[1], busy[1] = time.time(), cpu_s(broker.pid)
        rc = proc.wait()
        time.sleep(2)
        watch.stop.set()
        watch.join(10)
    slots = sorted(s for s, r in watch.released.items() if phase[0] + 1 < r[0] <= phase[1])
    print(
        f"watched {len(watch.released)} releases, partials of {len(watch.partials)} slots; "
        f"{len(slots)} slots ended inside the paced phase"
    )
    stages: dict[str, list[float]] = {
        k: []
        for k in (
            "first partial",
            "last partial",
            "last partial -> computed",
            "computed -> read",
            "due -> read",
        )
    }
    for s in slots:
        end, computed, read = watch.released[s]
        due = end + args.grace_s
        arrived = watch.partials.get(s, {})
        if len(arrived) < args.partitions:
            continue
        first, last = min(arrived.values()), max(arrived.values())
        stages["first partial"].append(first - due)
        stages["last partial"].append(last - due)
        stages["last partial -> computed"].append(computed - last)
        stages["computed -> read"].append(read - computed)
        stages["due -> read"].append(read - due)
    cores = (busy[1] - busy[0]) / (phase[1] - phase[0]) if phase[1] > phase[0] else float("nan")
    print(f"broker CPU during the paced phase: {cores:.2f} cores")
    print(f"release path over {len(stages['due -> read'])} slots (from the slot's due time):")
    for name, values in stages.items():
        print(f"  {name:<26} {pct(values)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
