"""Memory of an open-domain stream's open slot (issue 36): proportional to the distinct kept
``(user, key)`` pairs and keys, and given back when the slot closes.

Measured with ``tracemalloc`` (deterministic for the same operations, unlike RSS; numpy reports
its arrays to it), as ``test_slot_memory`` does for the labels streams. A slot keeps per kept
pair three 64-bit words (user digest, score, key digest: 24 bytes) and per distinct key its
digest, a pointer and the Python string (49 bytes of header for an ASCII string, plus its
characters): about 130 bytes for one user per 24-character key, so at least 100, which tells
the strings were measured at all. The bound: 200 bytes per key. ``dpstream capacity
open-keys`` measures the RSS at 1,000,000 keys (docs/capacity.md).
"""

from __future__ import annotations

import gc
import tracemalloc

import msgpack

from app.stream.collect.events import Collector, Record
from app.stream.config.streams import load_streams

YAML = """\
streams:
  - id: o
    domain: open
    slot_s: 3600
    grace_s: 1
    levels: [{name: std, w: 10, eps: 1.0, delta: 1.0e-6, population: 10000000}]
"""
TS = 7_200.0 + 1.0


def fill(c: Collector, keys: int) -> None:
    """One user per distinct 24-character key, in batches of 5,000."""
    for lo in range(0, keys, 5_000):
        batch = []
        for i in range(lo, min(keys, lo + 5_000)):
            event = {"stream": "o", "user": f"user-{i}", "ts": TS, "value": f"{i:08d}.example/p/1"}
            batch.append(Record(i, event["user"].encode(), msgpack.packb(event)))
        assert c.add_batch(0, batch, TS) == []


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_an_open_slot_costs_under_200_bytes_per_key_and_is_freed_at_close(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    c = Collector(load_streams(path, env={}), 1, b"k" * 32, "test")
    c.assign(0)
    c.partitions[0].caught_up = True
    keys = 50_000
    tracemalloc.start()
    try:
        fill(c, 1_000)  # warm: caches and the first allocations of every kind
        c.partitions[0].buckets.clear()
        c.partitions[0].min_offset.clear()
        before = traced()
        fill(c, keys)
        held = (traced() - before) / keys
        c.observe_fetch(0, TS + 3_700, at_end=True, gap_s=1e9)
        c.observe_fetch(0, TS + 3_710, at_end=True, gap_s=1e9)
        partials, _ = c.flush()
        assert sum(len(p.keys) for p in partials) == keys
        del partials
        left = (traced() - before) / keys
    finally:
        tracemalloc.stop()
    assert 100 <= held <= 200, held
    assert left <= 2, left
