"""Which slots lost data as late: the default, count-free late-data signal.

A value is dropped late in two places: the collect stage meets an event of a slot its
partition already closed (:mod:`app.stream.collect.events`), or the release stage discards a
partition's partial for a slot it already released (:mod:`app.stream.release.central`).
How many values (or users) were dropped is data, exported only behind
``DPSTREAM_EXPOSE_DATA_COUNTS``; *that* a slot lost something is what an operator needs to see
by default. :class:`LateSlots` turns the drops into ``dpstream_late_slots_total{stream}``: each
slot counts once per worker, whatever the number of values, partitions or stages behind it.

What it reveals: per stream and slot, one bit (some value of that slot arrived after the slot
closed). It carries no count, no value and no user, and the slot's release is public anyway;
docs/security.md weighs it.

>>> late = LateSlots()
>>> late.mark("s", 7), late.mark("s", 7), late.mark("s", 8)
(True, False, True)
>>> late.recent("s")
[7, 8]
"""

from __future__ import annotations

from collections import OrderedDict

from prometheus_client import Counter

from app import metrics

KEEP = 4096
"""Slots remembered per stream (so one slot is counted once); the oldest are forgotten first."""


class LateSlots:
    """Counts each (stream, slot) that lost a value once; see the module docstring."""

    def __init__(self, keep: int = KEEP, counter: Counter = metrics.LATE_SLOTS) -> None:
        """``counter``: the metric a newly marked slot increments (another one-bit-per-slot
        signal may reuse the class: :data:`app.metrics.CLIPPED_SLOTS`)."""
        self.keep = keep
        self.counter = counter
        self._seen: dict[str, OrderedDict[int, None]] = {}

    def mark(self, stream: str, slot: int) -> bool:
        """Record that ``slot`` of ``stream`` lost a value; whether it is newly counted."""
        seen = self._seen.setdefault(stream, OrderedDict())
        if slot in seen:
            return False
        seen[slot] = None
        if len(seen) > self.keep:
            seen.popitem(last=False)
        self.counter.labels(stream).inc()
        return True

    def recent(self, stream: str) -> list[int]:
        """The remembered slots of ``stream`` that lost a value, oldest first."""
        return sorted(self._seen.get(stream, {}))
