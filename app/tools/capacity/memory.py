"""Bytes an open slot costs per distinct user, measured in process with ``tracemalloc``.

A :class:`~app.stream.collect.events.Collector` of the bench stream (one partition) is fed
``users`` distinct users, one event each, in one slot, through its batch path in batches of
:data:`BATCH`; the figure is the traced memory after minus before, over ``users`` (numpy reports
its arrays to ``tracemalloc``; the records themselves are freed batch by batch). Deterministic
for the same operations, unlike RSS, which the throughput bench prints beside it.
"""

from __future__ import annotations

import gc
import tempfile
import time
import tracemalloc
from pathlib import Path

from app.stream.collect.events import Collector, Record
from app.stream.config import load_streams
from app.tools.capacity.fleet import LABELS, streams_yaml
from app.wire import events

BATCH = 5_000
SLOT_S = 3_600.0
"""One slot long enough to hold every event of the measure."""


def slot_bytes_per_user(users: int) -> float:
    """Traced bytes per distinct user of one open slot holding ``users`` users."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "streams.yaml"
        path.write_text(streams_yaml(SLOT_S))
        c = Collector(load_streams(path, env={}), partitions_total=1)
    c.assign(0)
    now = time.time()
    ts = (now // SLOT_S) * SLOT_S + 1.0
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for lo in range(0, users, BATCH):
            batch = []
            for i in range(lo, min(users, lo + BATCH)):
                user = f"u{i}"
                event = events.Event("bench", user, ts, i % len(LABELS))
                batch.append(Record(i, user.encode(), events.encode(event)))
            if c.add_batch(0, batch, now):
                raise RuntimeError("the collector refused a bench event")
            del batch
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (after - before) / users
