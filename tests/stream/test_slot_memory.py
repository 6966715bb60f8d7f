"""Memory of the collect stage's open slots: proportional to their distinct users, and given
back when they close (so a worker's memory is flat in the stream's length).

Measured with ``tracemalloc`` (deterministic for the same operations, unlike RSS; numpy reports
its arrays to it). The bound per user and open slot (issue 37, goal 2): at most 24 bytes; a
slot keeps a 64-bit digest and a one-byte value per user (d = 10), so at least 9 bytes, which
tells the arrays were measured at all. docs/capacity.md quotes the figure.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from types import SimpleNamespace

import msgpack
import pytest

from app.stream.collect.events import Collector
from app.stream.config.streams import load_streams

YAML = """\
streams:
  - id: s
    labels: [a, b, c, d, e, f, g, h, i, j]
    slot_s: 60
    grace_s: 1
    release_timeout_s: 1
    mechanism: {name: pba}
    levels:
      - {name: only, w: 3, eps: 1.0}
"""


def fill(c: Collector, users: int, ts: float) -> None:
    """One event per user, in slot ``ts``, through the batch path in batches of 5,000."""
    for lo in range(0, users, 5_000):
        events = [
            (i, {"stream": "s", "user": f"user-{i}", "ts": ts, "value": i % 10})
            for i in range(lo, min(users, lo + 5_000))
        ]
        batch = [
            SimpleNamespace(key=e["user"].encode(), value=msgpack.packb(e), offset=i)
            for i, e in events
        ]
        assert c.add_batch(0, batch, ts) == []


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def slot_costs(tmp_path, users: int) -> tuple[float, float]:
    """Bytes per user of a second open slot of the same users, and what both slots leave
    behind per user once closed, over the memory after the first slot's users were seen."""
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    c = Collector(load_streams(path, env={}), partitions_total=1)
    c.assign(0)
    c.partitions[0].caught_up = True
    t0 = (time.time() // 60) * 60 + 1
    tracemalloc.start()
    try:
        base = traced()
        fill(c, users, t0)
        one = traced()
        fill(c, users, t0 + 60)
        two = traced()
        c.observe_fetch(0, t0 + 200, at_end=True, gap_s=1_000)
        c.observe_fetch(0, t0 + 230, at_end=True, gap_s=1_000)
        partials, _ = c.flush()
        del partials
        closed = traced()
    finally:
        tracemalloc.stop()
    assert not c.partitions[0].buckets
    # What stays once closed is the key -> partition cache (bounded by PARTITION_CACHE).
    return (two - one) / users, (closed - base) - (one - base - (two - one))


@pytest.mark.parametrize("users", [20_000])
def test_an_open_slot_costs_a_bounded_amount_per_distinct_user_and_is_freed(tmp_path, users):
    per_slot, left = slot_costs(tmp_path, users)
    assert 9 <= per_slot <= 24
    # Closing both slots gives back both buckets: at most a tenth of one slot's size stays.
    assert left <= 0.1 * per_slot * users


def test_the_cost_of_an_open_slot_is_proportional_to_its_users(tmp_path):
    small, _ = slot_costs(tmp_path, 20_000)
    large, _ = slot_costs(tmp_path, 60_000)
    assert large == pytest.approx(small, rel=0.25)
