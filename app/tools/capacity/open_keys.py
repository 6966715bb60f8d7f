"""``dpstream capacity open-keys``: a worker's memory with 1,000,000 distinct keys in one slot.

Issue 36 asks that a worker with a million distinct keys in a slot stay within a stated RSS
bound. This drives the collect stage directly (no broker: the memory is the
:class:`~app.stream.collect.events.Collector`'s): ``--keys`` users each send one distinct key
(``--key-chars`` long) of an open stream in one slot, through the batch path in batches of
``--batch`` records (a fetch's worth), then the slot closes into its
:class:`~app.stream.internal.OpenPartial` chunks, each encoded as the worker would send it.

It prints the process's RSS before the events, once the slot is filled and its peak while it
filled, its peak through the close, and the growth per distinct key (peak minus before, over
the keys), the times and the chunks. RSS, not ``tracemalloc``: it is what the issue bounds,
and it includes numpy's and the allocator's overhead (``tests/stream/test_open_memory.py``
bounds the traced bytes per key at a smaller size). Peak RSS is ``getrusage``'s high-water
mark of the process.
"""

from __future__ import annotations

import argparse
import json
import resource
import secrets
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from app.stream.collect.events import Collector, Record
from app.stream.config import load_streams
from app.wire import events

SLOT_S = 3_600.0
"""One slot long enough to hold every event of the measure."""
STREAM = """\
streams:
  - id: keys
    domain: open
    max_keys: {max_keys}
    max_key_chars: 256
    slot_s: {slot_s}
    grace_s: 1
    levels: [{{name: std, w: 10, eps: 1.0, delta: 1.0e-6, population: 10000000}}]
"""


@dataclass(frozen=True)
class OpenKeysFigures:
    """What one run measured (sizes in MiB, times in seconds)."""

    keys: int
    key_chars: int
    batch: int
    rss_before_mib: float
    rss_filled_mib: float
    rss_peak_fill_mib: float
    rss_peak_close_mib: float
    bytes_per_key: float
    fill_s: float
    close_s: float
    chunks: int
    wire_mib: float


def _rss_mib() -> float:
    """The process's resident set now (``/proc/self/statm``), MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _peak_mib() -> float:
    """The process's peak resident set so far (Linux: ``ru_maxrss`` in KiB), MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(keys: int, key_chars: int, batch: int, max_keys: int = 1) -> OpenKeysFigures:
    """Fill one slot with ``keys`` users sending one distinct key each, then close it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "streams.yaml"
        path.write_text(STREAM.format(max_keys=max_keys, slot_s=SLOT_S))
        c = Collector(load_streams(path, env={}), 1, secrets.token_bytes(32), "capacity")
    c.assign(0)
    c.partitions[0].caught_up = True
    now = time.time()
    ts = (now // SLOT_S) * SLOT_S + 1.0
    pad = "x" * max(key_chars - 12, 0)
    before = _rss_mib()
    start = time.perf_counter()
    for lo in range(0, keys, batch):
        records = []
        for i in range(lo, min(keys, lo + batch)):
            user, key = f"u{i}", f"{i:08d}.{pad}"[:key_chars]
            raw = events.encode(events.Event("keys", user, ts, key))
            records.append(Record(i, user.encode(), raw))
        if c.add_batch(0, records, now):
            raise RuntimeError("the collector refused a bench event")
        del records
    fill_s = time.perf_counter() - start
    filled, peak_fill = _rss_mib(), _peak_mib()
    start = time.perf_counter()
    c.observe_fetch(0, ts + SLOT_S + 5.0, at_end=True, gap_s=1e9)
    c.observe_fetch(0, ts + SLOT_S + 10.0, at_end=True, gap_s=1e9)
    partials, _ = c.flush()
    wire = sum(len(p.encode()) for p in partials)
    close_s = time.perf_counter() - start
    peak_close = _peak_mib()
    return OpenKeysFigures(
        keys=keys,
        key_chars=key_chars,
        batch=batch,
        rss_before_mib=round(before, 1),
        rss_filled_mib=round(filled, 1),
        rss_peak_fill_mib=round(peak_fill, 1),
        rss_peak_close_mib=round(peak_close, 1),
        bytes_per_key=round((max(peak_fill, peak_close) - before) * 2**20 / keys, 1),
        fill_s=round(fill_s, 2),
        close_s=round(close_s, 2),
        chunks=len(partials),
        wire_mib=round(wire / 2**20, 1),
    )


def run_open_keys(args: argparse.Namespace) -> int:
    figures = measure(args.keys, args.key_chars, args.batch, args.max_keys)
    print(
        f"open slot of {figures.keys:,} distinct keys ({figures.key_chars} chars): RSS "
        f"{figures.rss_before_mib} MiB before, {figures.rss_filled_mib} MiB filled (peak "
        f"{figures.rss_peak_fill_mib} MiB), "
        f"{figures.rss_peak_close_mib} MiB through the close; {figures.bytes_per_key} bytes "
        f"per key; fill {figures.fill_s} s, close {figures.close_s} s, {figures.chunks} "
        f"partials ({figures.wire_mib} MiB)",
        file=sys.stderr,
    )
    print(json.dumps(asdict(figures)))
    return 0
