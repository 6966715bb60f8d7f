"""What a fetch costs the embedded broker against the batches its partition holds (issue 37).

Usage: ``.venv/bin/python scripts/broker_batches.py [--held 0,2500,5000,10000,20000,30000]
[--probes 30]``

Starts an embedded Tansu broker, creates a one-partition topic and fills it with one-record
batches (``linger.ms`` 0, one message per batch) up to each ``--held`` count; at each count a
consumer sits at the partition's end (50 ms fetch waits, as the worker's) while a producer sends
one record every 100 ms, ``--probes`` times: prints the produce -> read latency (p50, p90) and
the broker's CPU (cores) over the probes. ``docs/capacity.md`` (The embedded broker's limits)
quotes it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100


def main() -> int:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from app.stream.broker import EmbeddedBroker

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--held", default="0,2500,5000,10000,20000,30000")
    ap.add_argument("--probes", type=int, default=30)
    args = ap.parse_args()
    with EmbeddedBroker() as broker:
        boot = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": boot})
        for f in admin.create_topics([NewTopic("t", 1, 1)]).values():
            f.result()
        producer = Producer({"bootstrap.servers": boot, "linger.ms": 0, "batch.num.messages": 1})
        held = 0
        for target in (int(x) for x in args.held.split(",")):
            while held < target:
                producer.produce("t", b"x" * 100)
                producer.poll(0)
                held += 1
            producer.flush(120)
            c = Consumer({"bootstrap.servers": boot, "group.id": "m", "fetch.wait.max.ms": 50})
            _, end = c.get_watermark_offsets(TopicPartition("t", 0), 60)
            c.assign([TopicPartition("t", 0, end)])
            c.poll(1)
            took, cpu0, wall0 = [], cpu_s(broker.pid), time.monotonic()
            for _ in range(args.probes):
                t0 = time.perf_counter()
                producer.produce("t", b"y")
                producer.flush(30)
                held += 1
                m = None
                while m is None and time.perf_counter() - t0 < 30:
                    m = c.poll(0.01)
                took.append((time.perf_counter() - t0) * 1000)
                time.sleep(0.1)
            busy = (cpu_s(broker.pid) - cpu0) / (time.monotonic() - wall0)
            c.close()
            took.sort()
            p50, p90 = took[len(took) // 2], took[int(0.9 * (len(took) - 1))]
            print(
                f"held {target:>6,} batches: produce -> read p50 {p50:6.1f} ms, p90 {p90:6.1f} "
                f"ms; broker {busy:.2f} cores",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
