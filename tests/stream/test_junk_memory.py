"""Bounded memory on junk (issue 23, item 7): oversized records are refused before they are
decoded, and what is kept of each one for the dead-letter topic is bounded, so hundreds of MB
of junk leave the worker's RSS where it was."""

from __future__ import annotations

import gc
import logging
from pathlib import Path
from types import SimpleNamespace

import msgpack

from app.stream.collect.events import Collector
from app.stream.collect.policy import dead_letter_policy
from app.stream.config import load_streams
from app.wire.dead_letters import TOO_LARGE_KEEP_BYTES
from app.wire.events import MAX_BYTES as MAX_EVENT_BYTES

YAML = """
streams:
  - id: s
    labels: [a, b]
    slot_s: 10
    grace_s: 1
    mechanism: {name: pba}
    levels: [{name: only, w: 3, eps: 1.0}]
"""
JUNK_MB = 400
"""Junk fed through the collect stage: 400 records of 1 MB."""
RSS_GROWTH_BOUND_MB = 16
"""The resident set may grow this much at most (before, each dead letter queued 64 KiB of the
value and the whole key: ~230 MB for this flood)."""


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_flood_of_oversized_junk_keeps_rss_bounded(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    collector = Collector(load_streams(path, env={}), partitions_total=1)
    collector.assign(0)
    queued: list[tuple[bytes | None, bytes]] = []  # what the service keeps until acknowledged
    policy = dead_letter_policy(lambda key, value: queued.append((key, value)))
    log = logging.getLogger("junk")
    # The fetched bytes are the consumer's (allocated once here, as a fetch buffer would be):
    # what is measured is what the collect stage and the dead-letter queue keep of them.
    pool = [
        (
            b"k%d" % i * (1 << 19),
            msgpack.packb({"stream": "s", "user": "u", "ts": 1.0, "pad": bytes([i]) * (1 << 20)}),
        )
        for i in range(20)
    ]
    gc.collect()
    before = rss_mb()
    offset = 0
    for _ in range(JUNK_MB // len(pool)):
        batch = []
        for key, junk in pool:
            batch.append(
                SimpleNamespace(topic="events", partition=0, offset=offset, key=key, value=junk)
            )
            offset += 1
        for exc, rec in collector.add_batch(0, batch, wall_now=2.0):
            policy(exc, rec, log)
        del batch
    gc.collect()
    grown = rss_mb() - before
    letters = [msgpack.unpackb(v) for _, v in queued]
    assert len(letters) == JUNK_MB and {d["reason"] for d in letters} == {"too_large"}
    assert all(
        len(d["value"]) == TOO_LARGE_KEEP_BYTES and d["size"] > MAX_EVENT_BYTES for d in letters
    )
    kept = sum(len(v) + len(k or b"") for k, v in queued)
    assert kept < JUNK_MB * 4 * TOO_LARGE_KEEP_BYTES, kept
    print(f"\n{JUNK_MB} MB of junk: RSS +{grown:.1f} MB, {kept / 1024:.0f} KB queued")
    assert grown < RSS_GROWTH_BOUND_MB, f"RSS grew {grown:.1f} MB"
