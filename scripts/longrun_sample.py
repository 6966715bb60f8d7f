"""Run ``dpstream demo`` for hours and sample it every ``--every-s`` seconds (issue 37, goal 5).

Usage: ``.venv/bin/python scripts/longrun_sample.py --out DIR [--duration-s 7500]
[--every-s 30] [-- DEMO ARGS...]``

Starts ``dpstream demo --duration D`` (embedded Tansu broker) in a session of its own, its
stdout and stderr in ``DIR/demo.out`` and ``DIR/demo.err``, and writes one CSV row per sample to
``DIR/samples.csv``:

- ``releases``, ``delay_p50_s``, ``delay_p99_s``, ``delay_max_s``: the releases seen on the
  ``releases`` topic during the sample, and the delay from each slot's end to the moment this
  script read its release (a consumer of its own, waiting 10 ms per fetch); ``slots_missing``:
  slot numbers skipped between releases since the start;
- ``worker_rss_mib``, ``broker_rss_mib``; ``worker_cpu``, ``broker_cpu``: cores used over the
  sample (``/proc``);
- ``fetch_ms``: a consumer seeks to the last record of ``events`` partition 0 and waits for it:
  what one fetch of the newest batch costs the broker now; ``list_offsets_ms``: the end-offset
  request before it; ``events_end``: the summed end offsets of ``events``;
- ``lag_s``: the worker's ``dpstream_consumer_lag_seconds`` (largest partition).

It stops itself: the demo ends after ``--duration-s``; if it is still alive 60 s later, its
process group gets SIGTERM, then SIGKILL, as it does when this script gets SIGTERM. The demo's
process id goes to ``DIR/demo.pid``. Exit status: the demo's.
"""

from __future__ import annotations

import argparse
import csv
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import msgpack

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUIET = logging.getLogger("longrun.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False
"""librdkafka's own lines (reconnection attempts once the demo is gone) go nowhere."""

FIELDS = [
    "utc",
    "elapsed_s",
    "releases",
    "delay_p50_s",
    "delay_p99_s",
    "delay_max_s",
    "slots_missing",
    "worker_rss_mib",
    "broker_rss_mib",
    "worker_cpu",
    "broker_cpu",
    "fetch_ms",
    "list_offsets_ms",
    "events_end",
    "lag_s",
]


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_named(parent: int, name: str) -> int | None:
    """The first process whose parent is ``parent`` and whose command name is ``name``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        ppid = int(text.rsplit(")", 1)[1].split()[1])
        if ppid == parent and comm == name:
            return int(stat.parent.name)
    return None


def wait_for(path: Path, pattern: str, timeout_s: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            found = re.search(pattern, path.read_text(errors="replace"))
            if found:
                return found
        time.sleep(0.5)
    raise SystemExit(f"longrun: no {pattern!r} in {path} after {timeout_s} s")


class Releases(threading.Thread):
    """Reads ``releases`` from its end; notes each release's delay from its slot's end."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.delays: list[float] = []
        self.last_slot: dict[str, int] = {}
        self.missing = 0

    def take(self) -> list[float]:
        with self.lock:
            out, self.delays = self.delays, []
            return out

    def run(self) -> None:
        from confluent_kafka import OFFSET_END, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "longrun-releases",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "logger": QUIET,
            }
        )
        meta = c.list_topics(self.topic, timeout=30).topics[self.topic]
        c.assign([TopicPartition(self.topic, p, OFFSET_END) for p in meta.partitions])
        while not self.stop.is_set():
            m = c.poll(0.2)
            if m is None or m.error():
                continue
            seen = time.time()
            rel = msgpack.unpackb(m.value() or b"\xc0")
            if not isinstance(rel, dict) or "slot" not in rel:
                continue
            with self.lock:
                last = self.last_slot.get(rel["stream"])
                if last is not None and rel["slot"] > last + 1:
                    self.missing += rel["slot"] - last - 1
                if last is None or rel["slot"] > last:
                    self.last_slot[rel["stream"]] = rel["slot"]
                    self.delays.append(seen - float(rel["end"]))
        c.close()


def probe(consumer: object, topic: str, partitions: int) -> tuple[float, float, int]:
    """``(fetch_ms, list_offsets_ms, summed end offsets)`` of ``topic``."""
    from confluent_kafka import TopicPartition

    t0 = time.perf_counter()
    lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, 0), 30)  # type: ignore[attr-defined]
    list_ms = (time.perf_counter() - t0) * 1000
    end = hi + sum(
        consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]  # type: ignore[attr-defined]
        for p in range(1, partitions)
    )
    if hi <= lo:
        return float("nan"), list_ms, end
    t0 = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, hi - 1)])  # type: ignore[attr-defined]
    fetch_ms = float("nan")
    while time.perf_counter() - t0 < 20:
        m = consumer.poll(0.05)  # type: ignore[attr-defined]
        if m is not None and not m.error():
            fetch_ms = (time.perf_counter() - t0) * 1000
            break
    consumer.unassign()  # type: ignore[attr-defined]
    return fetch_ms, list_ms, end


def lag_s(port: str) -> float:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:  # noqa: S310
            text = r.read().decode()
    except OSError:
        return float("nan")
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("dpstream_consumer_lag_seconds")
    ]
    return max(values) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--duration-s", type=float, default=7500.0)
    ap.add_argument("--every-s", type=float, default=30.0)
    ap.add_argument("demo_args", nargs="*")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out, err = args.out / "demo.out", args.out / "demo.err"
    dpstream = Path(sys.executable).with_name("dpstream")
    cmd = [str(dpstream), "demo", "--duration", str(args.duration_s), *args.demo_args]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the demo on the way out
    with open(out, "wb") as o, open(err, "wb") as e:
        demo = subprocess.Popen(cmd, stdout=o, stderr=e, start_new_session=True)  # noqa: S603
    (args.out / "demo.pid").write_text(f"{demo.pid}\n")
    hard_stop = time.monotonic() + args.duration_s + 60
    try:
        return sample(args, demo, out, err, hard_stop)
    finally:
        if demo.poll() is None:
            os.killpg(demo.pid, signal.SIGTERM)
            try:
                demo.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(demo.pid, signal.SIGKILL)


def sample(
    args: argparse.Namespace,
    demo: subprocess.Popen[bytes],
    out: Path,
    err: Path,
    hard_stop: float,
) -> int:
    from confluent_kafka import Consumer

    from app.stream.topics import load_topics

    bootstrap = wait_for(out, r"DPSTREAM_BROKER=(\S+)", 120).group(1)
    worker = int(wait_for(err, r"worker pid (\d+)", 60).group(1))
    port = wait_for(err, r"metrics on http://127\.0\.0\.1:(\d+)/", 60).group(1)
    broker = child_named(demo.pid, "tansu")
    prefix = os.environ.get("DPSTREAM_TOPIC_PREFIX", "")
    topics = load_topics(prefix)
    partitions = topics.spec("events").partitions
    releases = Releases(bootstrap, topics.releases)
    releases.start()
    prober = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "longrun-probe",
            "enable.auto.commit": False,
            "logger": QUIET,
        }
    )
    started = time.monotonic()
    cpu = {pid: cpu_s(pid) for pid in (worker, broker or -1)}
    with open(args.out / "samples.csv", "a", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        if f.tell() == 0:
            writer.writeheader()
        next_at = started + args.every_s
        while demo.poll() is None and time.monotonic() < hard_stop:
            time.sleep(max(0.0, next_at - time.monotonic()))
            next_at += args.every_s
            if demo.poll() is not None:
                break
            fetch_ms, list_ms, end = probe(prober, topics.events, partitions)
            delays = sorted(releases.take())
            used = {pid: cpu_s(pid) for pid in cpu}
            row = {
                "utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "elapsed_s": round(time.monotonic() - started),
                "releases": len(delays),
                "delay_p50_s": round(statistics.median(delays), 3) if delays else "",
                "delay_p99_s": round(delays[int(0.99 * (len(delays) - 1))], 3) if delays else "",
                "delay_max_s": round(delays[-1], 3) if delays else "",
                "slots_missing": releases.missing,
                "worker_rss_mib": round(rss_mib(worker), 1),
                "broker_rss_mib": round(rss_mib(broker), 1) if broker else "",
                "worker_cpu": round((used[worker] - cpu[worker]) / args.every_s, 3),
                "broker_cpu": round((used[broker] - cpu[broker]) / args.every_s, 3)
                if broker
                else "",
                "fetch_ms": round(fetch_ms, 1),
                "list_offsets_ms": round(list_ms, 1),
                "events_end": end,
                "lag_s": lag_s(port),
            }
            cpu = used
            writer.writerow(row)
            f.flush()
    releases.stop.set()
    prober.close()
    return demo.returncode if demo.poll() is not None else 1  # past the hard stop


if __name__ == "__main__":
    sys.exit(main())
