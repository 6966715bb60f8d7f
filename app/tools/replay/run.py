"""The replay of one central stream: rows in, one released slot at a time out, as the service.

Counting is the collect stage's own :class:`~app.stream.collect.events.Collector` (the same
decoding, slotting, one value per user per slot or ``max_values`` distinct ones, sum clipping,
level histories applied when a slot closes), fed the rows as ``events`` records of one
partition; releasing is the release stage's own
:func:`~app.stream.release.central.step_slot` on the stream's configured mechanism, with the
noise :func:`~app.stream.release.protocol.slot_rng` draws. Nothing about counting or noise is
written here.

What is the replay's own: the order and the clock. The rows are sorted by time (stably: rows of
the same time keep the file's order), as a live service receives them, so a user's first value
in a slot is the earliest by time. Every row is in before its slot closes (no late data: the
file is complete), so the stream's clock (``wall`` or ``event``) and its grace decide nothing;
the collector is run on a wall clock whose fetches the replay stamps itself. Slots are released
from the first one (``first``, default the slot of the earliest row) to the last (``last``,
default the slot of the latest row), empty or not, as the service releases every slot from its
first; rows before ``first`` are dropped as the service drops data older than its first release.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.dp.mechanism import Mechanism
from app.dp.open import OpenRelease
from app.dp.types import Release
from app.stream.collect.events import Collector, Record
from app.stream.config import StreamConfig
from app.stream.errors import ConfigError
from app.stream.release.central import step_slot
from app.stream.release.protocol import slot_rng
from app.tools.replay.read import BadRow, Row
from app.wire import events, preferences

BLOCK = 20_000
"""Rows handed to the collector at once (the service's batches are as large)."""
PARTITION = 0
GAP_S = 1e15
"""The replay's fetches never have a gap (any finite time apart)."""


@dataclass
class Released:
    """One released slot, with the exact histogram it was computed from (never written out)."""

    slot: int
    release: Release
    exact: np.ndarray
    window: list[Any]
    delayed: bool = False
    """Released at the close of a later slot (a period mechanism's earlier slots)."""

    def line(self, stream: StreamConfig) -> dict[str, Any]:
        """The JSON line of this slot (the fields of a ``releases`` record the replay knows)."""
        names = stream.level_names
        rel = self.release
        return {
            "stream": stream.id,
            "slot": self.slot,
            "start": stream.slots.start(self.slot),
            "end": stream.slots.end(self.slot),
            "histogram": [float(x) for x in rel.histogram],
            "fresh": bool(rel.fresh),
            "status": rel.status,
            "delayed": self.delayed,
            "mechanism": rel.mechanism,
            "spent_by_group": dict(zip(names, map(float, rel.spent), strict=True)),
            "window_spent_by_group": {
                n: float(w.spent) for n, w in zip(names, self.window, strict=True)
            },
        }


@dataclass
class OpenReleased:
    """One released slot of an open stream, with the bounded exact counts it was computed from
    (never written out)."""

    slot: int
    release: OpenRelease
    exact: dict[str, int]
    window: list[Any]
    """The mechanism's window report after the slot, per level (eps and delta spent)."""

    def line(self, stream: StreamConfig) -> dict[str, Any]:
        """The JSON line of this slot: the fields of an open ``releases`` record a replay
        knows, with the release as a key -> count map (``counts``, keys sorted as the release
        sorts them), and the levels' window spend of eps and delta after it."""
        names = stream.level_names
        rel = self.release
        return {
            "stream": stream.id,
            "slot": self.slot,
            "start": stream.slots.start(self.slot),
            "end": stream.slots.end(self.slot),
            "counts": rel.histogram(),
            "new_keys": [k for k, new in zip(rel.keys, rel.new.tolist(), strict=True) if new],
            "retired": list(rel.retired),
            "threshold": rel.threshold,
            "fresh": bool(rel.fresh),
            "status": rel.status,
            "mechanism": rel.mechanism,
            "spent_by_group": dict(zip(names, map(float, rel.eps_spent), strict=True)),
            "delta_spent_by_group": dict(zip(names, map(float, rel.delta_spent), strict=True)),
            "window_spent_by_group": {
                n: float(w.spent) for n, w in zip(names, self.window, strict=True)
            },
            "window_delta_spent_by_group": {
                n: float(w.delta_spent) for n, w in zip(names, self.window, strict=True)
            },
        }


@dataclass
class Tally:
    """What the replay counted: rows refused by reason, the collector's outcomes."""

    bad: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    before_first: int = 0
    rows: int = 0


def check_replayable(stream: StreamConfig) -> None:
    """:class:`ConfigError` unless the service releases ``stream`` centrally (the kinds a
    replay runs, open-domain streams included)."""
    if stream.local:
        raise ConfigError(
            f"stream {stream.id!r} is a local stream: its values are noised on the devices, "
            "there is nothing central to replay (`dpstream bench replay` simulates devices)"
        )


class Replay:
    """Rows in, :class:`Released` out; see the module docstring."""

    def __init__(
        self,
        stream: StreamConfig,
        key: bytes,
        deployment: str,
        first: int | None = None,
        last: int | None = None,
    ) -> None:
        check_replayable(stream)
        self.stream = stream
        self.key, self.deployment = key, deployment
        self.first, self.last = first, last
        # The replay's clock is its own (see the module): the counting stream, on a wall clock.
        counting = dataclasses.replace(stream, clock="wall")
        self.collector = Collector([counting], 1, key, deployment)  # key: an open bound's salt
        self.collector.assign(PARTITION)
        self.collector.mark_caught_up(PARTITION)
        self.collector.observe_fetch(PARTITION, -1e12, True, GAP_S)  # a healthy run starts
        self.mech: Mechanism = stream.build_mechanism()
        self.shape = (len(stream.levels), stream.d)
        self.dtype = np.float64 if stream.sums else np.int64
        self.counts: dict[int, np.ndarray] = {}
        self.exact: dict[int, np.ndarray] = {}
        self.next_slot: int | None = first
        self.fetched = -math.inf
        self.tally = Tally()

    # -- counting -----------------------------------------------------------------------------
    def _record(self, row: Row) -> Record:
        assert row.value is not None  # rows without a value are preferences alone
        ev = events.Event(self.stream.id, row.user, row.ts, row.value, row.amount)
        return Record(row.line, row.user.encode(), events.encode(ev))

    def add(self, rows: list[Row], on_bad: Callable[[BadRow], None]) -> None:
        """Count one block of rows (sorted by time, after every earlier block)."""
        records: list[Record] = []
        slots = self.stream.slots
        for row in rows:
            if row.level is not None:  # a preference counts whenever it was made
                self.collector.set_preference(row.user, _level(row.level), row.ts)
            if row.value is None:
                continue
            if self.first is not None and slots.slot_of(row.ts) < self.first:
                self.tally.before_first += 1
                continue
            try:
                records.append(self._record(row))
            except (OverflowError, TypeError, ValueError) as exc:
                on_bad(BadRow(row.line, "undecodable", f"cannot be encoded ({exc})"[:200]))
        self.tally.rows += len(rows)
        if records:
            if self.next_slot is None:
                self.next_slot = slots.slot_of(min(r.ts for r in rows))
            for refused, rec in self.collector.add_batch(PARTITION, records, math.inf):
                on_bad(BadRow(rec.offset, refused.reason, refused.detail))

    def close_before(self, ts: float) -> Iterator[Released | OpenReleased]:
        """Close every slot due by ``ts`` (no later row can fall in it) and release it."""
        if ts <= self.fetched:
            return
        self.fetched = ts
        self.collector.observe_fetch(PARTITION, ts, True, GAP_S)
        partials, _ = self.collector.flush()
        self._keep(partials)
        for outcome_key, n in self.collector.take_outcomes().items():
            self.tally.outcomes[outcome_key[1]] += n
        top = self.stream.slots.last_closable(ts)
        if self.last is not None:
            top = min(top, self.last)
        yield from self._release_through(top)

    def _keep(self, partials: list[Any]) -> None:
        """Add the flushed partials' counts to their slots' (a stream's own kind of partial)."""
        for p in partials:
            if any(p.counts):
                counts = np.asarray(p.counts, dtype=self.dtype).reshape(self.shape)
                self.counts[p.slot] = self.counts.get(p.slot, 0) + counts

    def finish(self) -> Iterator[Released | OpenReleased]:
        """Close and release every slot through ``last`` (default: the latest row's)."""
        part = self.collector.partitions[PARTITION]
        newest = part.max_ts if part.max_ts > -math.inf else None
        last = self.last
        if last is None:
            last = self.stream.slots.slot_of(newest) if newest is not None else None
        if last is None or self.next_slot is None:
            return
        self.last = last
        yield from self.close_before(self.stream.slots.due(last) + self.stream.slots.slot_s)
        yield from self._release_through(last)

    def _release_through(self, top: int) -> Iterator[Released | OpenReleased]:
        if self.next_slot is None:
            return
        population = [lv.population for lv in self.stream.levels]  # public, as the service's
        while self.next_slot <= top:
            slot = self.next_slot
            counts = self.counts.pop(slot, None)
            if counts is None:
                counts = np.zeros(self.shape, dtype=self.dtype)
            self.exact[slot] = counts.sum(axis=0)
            rng = slot_rng(self.key, self.deployment, self.stream, slot)
            placed = step_slot(self.stream, self.mech, slot, counts, rng, population)
            window = self.mech.window_report()
            for rel_slot, rel in placed:
                exact = self.exact.pop(rel_slot)
                yield Released(rel_slot, rel, exact, window, delayed=rel_slot < slot)
            self.next_slot = slot + 1


def _level(name: str) -> str | None:
    """The level a preference row names, read as the service reads a ``preferences`` value."""
    return preferences.decode(preferences.encode(preferences.Preference(name))).level


def replay_rows(
    replay: Replay,
    rows: Iterable[Row],
    on_bad: Callable[[BadRow], None],
    on_block: Callable[[int], None] = lambda n: None,
) -> Iterator[Released | OpenReleased]:
    """Run sorted ``rows`` through ``replay`` block by block; the released slots in order."""
    block: list[Row] = []
    for row in rows:
        if len(block) >= BLOCK and row.ts > block[-1].ts:
            replay.add(block, on_bad)
            on_block(len(block))
            yield from replay.close_before(row.ts)
            block = []
        block.append(row)
    if block:
        replay.add(block, on_bad)
        on_block(len(block))
    yield from replay.finish()
