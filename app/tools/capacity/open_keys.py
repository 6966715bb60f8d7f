"""``dpstream capacity open-keys``: a worker's memory with 1,000,000 distinct keys in one slot.

Issue 36 asks that a worker with a million distinct keys in a slot stay within a stated RSS
bound. This measures both sides of such a slot, in process and without a broker:

* **Collect** (the memory is the :class:`~app.stream.collect.events.Collector`'s): ``--keys``
  users each send one distinct key (``--key-chars`` long) of an open stream in one slot, and
  ``--hot-keys`` of those keys are sent by enough more users each (one and a half times the
  selection threshold) to be selected, so that the release cap (``--max-released-keys``) is
  what limits the release. The events go through the batch path in batches of ``--batch``
  records (a fetch's worth), then the slot closes into its
  :class:`~app.stream.internal.OpenPartial` chunks, each encoded as the worker sends it on
  ``partials``.
* **Release**, in a fresh process (so that its RSS is its own): the release agent's own code
  (:class:`~app.stream.release.Releaser`, whose :class:`~app.stream.release.open.OpenDriver`
  drives the slot) over dicts standing for its ``ledger`` and ``slots`` tables, a broker that
  acknowledges at once, and a wall clock this module moves. It is handed the chunks' bytes one
  by one, as the ``partials`` topic would (the agent decodes them with
  :func:`app.stream.internal.decode`, checks and stores them: *merge*), then the tick that
  closes the slot: the agent gathers the chunks and steps the mechanism over every candidate
  key (*gather and step*; the step alone is what the agent reports to its listeners), then
  encodes the release, audit record and ledger entry and writes the entry (*encode*). The
  ``slots`` dict keeps the stored chunks in memory, where the worker's RocksDB store would
  keep them on disk: the figure is an upper bound of the agent's.

For each side it prints the process's RSS before and at its peak (the kernel's high-water
mark, ``VmHWM``), the growth per distinct key, and the wall and CPU time of each stage, in one
table, then the release's keys and sizes, and all of it as one JSON line on stdout. RSS, not
``tracemalloc``: it is what the issue bounds, and it includes numpy's and the allocator's
overhead (``tests/stream/test_open_memory.py`` bounds the traced bytes per key at a smaller
size).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import multiprocessing
import resource
import secrets
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from app.stream.collect.events import Collector, Record
from app.stream.config import StreamConfig, load_settings, load_streams
from app.stream.internal import Tick
from app.stream.release import ReleaseListener, Releaser
from app.stream.topics import Topics, load_topics
from app.wire import events, releases

SLOT_S = 3_600.0
"""One slot long enough to hold every event of the measure."""
GRACE_S = 1.0
STREAM = """\
streams:
  - id: keys
    domain: open
    max_keys: {max_keys}
    max_key_chars: 256
    max_released_keys: {max_released_keys}
    slot_s: {slot_s}
    grace_s: {grace_s}
    levels: [{{name: std, w: 10, eps: 1.0, delta: 1.0e-6, population: 10000000}}]
"""
HOT_MARGIN = 1.5
"""A hot key's users, over the selection threshold: 8 noise scales above it at ``w = 10``."""
PREFIX = struct.Struct(">I")
"""The length before each encoded chunk in the file the release side reads."""


@dataclass(frozen=True)
class Stage:
    """One stage: its wall and CPU (process) seconds, the RSS at its end and the peak RSS so
    far (MiB)."""

    wall_s: float
    cpu_s: float
    rss_mib: float
    peak_mib: float


@dataclass(frozen=True)
class Side:
    """One side's RSS (MiB): before its work, at its peak, and the growth per distinct key."""

    rss_before_mib: float
    rss_peak_mib: float
    bytes_per_key: float


@dataclass(frozen=True)
class CollectFigures:
    """What the collect side measured."""

    side: Side
    fill: Stage
    close: Stage
    events: int
    chunks: int
    wire_mib: float


@dataclass(frozen=True)
class ReleaseFigures:
    """What the release side measured (sizes in bytes)."""

    side: Side
    merge: Stage
    gather_step: Stage
    step_wall_s: float
    encode: Stage
    released_keys: int
    cap: int
    release_bytes: int
    ledger_entry_bytes: int


@dataclass(frozen=True)
class OpenKeysFigures:
    """What one run measured."""

    keys: int
    key_chars: int
    hot_keys: int
    batch: int
    collect: CollectFigures
    release: ReleaseFigures


def _rss_mib() -> float:
    """The process's resident set now (``/proc/self/statm``), MiB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def _peak_mib() -> float:
    """The process's peak resident set so far (``VmHWM`` of ``/proc/self/status``), MiB: this
    process's own, where ``ru_maxrss`` of a child may hold the parent's it was started from."""
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmHWM:")[1].split()[0]) / 1024


Mark = tuple[float, float, float, float]
"""A moment: wall clock, process time, RSS and peak RSS."""


def _mark() -> Mark:
    return time.perf_counter(), time.process_time(), _rss_mib(), _peak_mib()


def _stage(start: Mark, end: Mark | None = None) -> Stage:
    """The stage from ``start`` to ``end`` (None: now)."""
    wall, cpu, rss, peak = end or _mark()
    return Stage(round(wall - start[0], 2), round(cpu - start[1], 2), round(rss, 1), round(peak, 1))


def _side(before: float, peak: float, keys: int) -> Side:
    return Side(round(before, 1), round(peak, 1), round((peak - before) * 2**20 / keys, 1))


def _stream(path: Path, max_keys: int, cap: int) -> StreamConfig:
    yaml = STREAM.format(max_keys=max_keys, max_released_keys=cap, slot_s=SLOT_S, grace_s=GRACE_S)
    path.write_text(yaml)
    return load_streams(path, env={})[0]


def _hot_users(stream: StreamConfig) -> int:
    """Users per hot key: :data:`HOT_MARGIN` times the stream's selection threshold."""
    return math.ceil(HOT_MARGIN * stream.build_open().tau)


def collect(
    keys: int, key_chars: int, batch: int, max_keys: int, cap: int, hot_keys: int, out: Path
) -> tuple[CollectFigures, int]:
    """Fill one slot with ``keys`` users sending one distinct key each (and the hot keys' more
    users), close it and write its encoded chunks to ``out``; the figures and the slot."""
    with tempfile.TemporaryDirectory() as tmp:
        stream = _stream(Path(tmp) / "streams.yaml", max_keys, cap)
        c = Collector((stream,), 1, secrets.token_bytes(32), "capacity")
    c.assign(0)
    c.partitions[0].caught_up = True
    now = time.time()
    ts = (now // SLOT_S) * SLOT_S + 1.0
    pad = "x" * max(key_chars - 12, 0)
    hot = _hot_users(stream) if hot_keys else 0
    total = keys + hot_keys * hot
    start = _mark()
    for lo in range(0, total, batch):
        records = []
        for i in range(lo, min(total, lo + batch)):
            key = i if i < keys else (i - keys) // hot  # a hot key is one of the first keys
            user, value = f"u{i}", f"{key:08d}.{pad}"[:key_chars]
            raw = events.encode(events.Event(stream.id, user, ts, value))
            records.append(Record(i, user.encode(), raw))
        if c.add_batch(0, records, now):
            raise RuntimeError("the collector refused a bench event")
        del records
    fill = _stage(start)
    before, start = start[2], _mark()
    c.observe_fetch(0, ts + SLOT_S + 5.0, at_end=True, gap_s=1e9)
    c.observe_fetch(0, ts + SLOT_S + 10.0, at_end=True, gap_s=1e9)
    partials, _ = c.flush()
    wire = 0
    with out.open("wb") as f:  # as the worker produces them on ``partials``
        for p in partials:
            raw = p.encode()
            wire += len(raw)
            f.write(PREFIX.pack(len(raw)) + raw)
    close = _stage(start)
    figures = CollectFigures(
        side=_side(before, close.peak_mib, keys),
        fill=fill,
        close=close,
        events=total,
        chunks=len(partials),
        wire_mib=round(wire / 2**20, 1),
    )
    return figures, stream.slots.slot_of(ts)


def _chunks(path: Path) -> Iterator[bytes]:
    """The encoded chunks :func:`collect` wrote, one at a time."""
    with path.open("rb") as f:
        while head := f.read(PREFIX.size):
            (size,) = PREFIX.unpack(head)
            yield f.read(size)


class _Watch(ReleaseListener):
    """The step's seconds and the moment it ended, as the driver tells its listeners."""

    def __init__(self) -> None:
        self.step_s = 0.0
        self.stepped: Mark | None = None

    def on_step(self, stream: StreamConfig, seconds: float, close_lag_s: float | None) -> None:
        self.step_s, self.stepped = seconds, _mark()


class _Clock:
    """The agent's wall clock, moved by :func:`release`."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def release(config: str, chunks: Path, slot: int, keys: int) -> ReleaseFigures:
    """Hand the encoded ``chunks`` of ``slot`` to a release agent of the stream in ``config``
    (a streams file), then close the slot; run in a fresh process (:func:`measure`)."""
    settings = load_settings(
        env={"DPSTREAM_NOISE_KEY": secrets.token_hex(32), "DPSTREAM_DEPLOYMENT": "capacity"},
        config=Path(config),
    )
    stream = settings.streams[0]
    base = load_topics()
    topics = Topics(  # one events partition, as the collector had
        base.prefix,
        tuple(
            dataclasses.replace(s, partitions=1) if s.role == "events" else s for s in base.specs
        ),
    )
    ledger: dict[str, bytes] = {}
    sent: list[tuple[str, bytes]] = []
    persisted: list[Mark] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        sent.append((topic, value))

    async def persist() -> None:
        persisted.append(_mark())

    due = stream.slots.due(slot)
    clock, watch = _Clock(due - GRACE_S / 2), _Watch()
    agent = Releaser(settings, topics, ledger, {}, produce, persist, clock, listeners=[watch])

    def hand(raw: bytes) -> None:
        asyncio.run(agent.on_message(raw))

    hand(Tick(stream.id, {0: clock.now}, 1).encode())  # releases the slot before, empty
    start = _mark()
    for raw in _chunks(chunks):
        hand(raw)
    merge = _stage(start)
    before, start = start[2], _mark()
    clock.now = due + 1.0
    persisted.clear()
    hand(Tick(stream.id, {0: due}, 1).encode())
    step_end = watch.stepped
    if not persisted or step_end is None or agent.failed:
        raise RuntimeError(f"the release agent did not release the slot: {agent.failed}")
    encode = _stage(step_end, persisted[0])
    record = next(v for t, v in reversed(sent) if t == topics.releases)
    released = releases.decode(record)
    if released.slot != slot:
        raise RuntimeError(f"the agent released slot {released.slot}, not {slot}")
    return ReleaseFigures(
        side=_side(before, _peak_mib(), keys),
        merge=merge,
        gather_step=_stage(start, step_end),
        step_wall_s=round(watch.step_s, 2),
        encode=encode,
        released_keys=len(released.keys or ()),
        cap=stream.max_released_keys,
        release_bytes=len(record),
        ledger_entry_bytes=len(ledger[stream.id]),
    )


def measure(
    keys: int,
    key_chars: int,
    batch: int,
    max_keys: int = 1,
    cap: int = 128,
    hot_keys: int | None = None,
) -> OpenKeysFigures:
    """Both sides of one slot of ``keys`` distinct keys (``hot_keys``: ``2 * cap`` unless
    given); the release side in a fresh process."""
    hot = 2 * cap if hot_keys is None else hot_keys
    if not 0 <= hot <= keys:
        raise ValueError(f"hot keys must be between 0 and the keys ({keys}), got {hot}")
    with tempfile.TemporaryDirectory() as tmp:
        chunks = Path(tmp) / "chunks"
        collected, slot = collect(keys, key_chars, batch, max_keys, cap, hot, chunks)
        config = Path(tmp) / "streams.yaml"
        _stream(config, max_keys, cap)
        spawn = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(1, mp_context=spawn) as pool:
            released = pool.submit(release, str(config), chunks, slot, keys).result()
    return OpenKeysFigures(keys, key_chars, hot, batch, collected, released)


def table(f: OpenKeysFigures) -> str:
    """Both sides as one table (per stage: times, RSS at its end, peak RSS so far), then the
    release's keys and sizes."""
    c, r = f.collect, f.release
    rows = [
        ("collect", "fill", c.fill, ""),
        ("collect", f"close ({c.chunks} chunks)", c.close, c.side.bytes_per_key),
        ("release", f"merge ({c.chunks} chunks)", r.merge, ""),
        ("release", f"gather + step ({r.step_wall_s} s)", r.gather_step, ""),
        ("release", "encode", r.encode, r.side.bytes_per_key),
    ]
    lines = [
        f"{'side':<8} {'stage':<26} {'wall s':>7} {'cpu s':>7} {'RSS MiB':>8} {'peak':>7} "
        f"{'B/key':>6}",
        f"{'collect':<8} {'before':<26} {'':>7} {'':>7} {c.side.rss_before_mib:>8}",
    ]
    for side, stage, t, per_key in rows:
        if side == "release" and stage.startswith("merge"):
            lines.append(f"{side:<8} {'before':<26} {'':>7} {'':>7} {r.side.rss_before_mib:>8}")
        lines.append(
            f"{side:<8} {stage:<26} {t.wall_s:>7} {t.cpu_s:>7} {t.rss_mib:>8} {t.peak_mib:>7} "
            f"{per_key!s:>6}"
        )
    lines.append(
        f"{f.keys:,} distinct keys of {f.key_chars} chars ({c.events:,} events, {f.hot_keys} "
        f"hot keys); chunks {c.wire_mib} MiB; released {r.released_keys} keys (cap {r.cap}); "
        f"release record {r.release_bytes:,} B, ledger entry {r.ledger_entry_bytes:,} B"
    )
    return "\n".join(lines)


def run_open_keys(args: argparse.Namespace) -> int:
    figures = measure(
        args.keys, args.key_chars, args.batch, args.max_keys, args.max_released_keys,
        args.hot_keys,
    )  # fmt: skip
    print(table(figures), file=sys.stderr)
    print(json.dumps(asdict(figures)))
    return 0
