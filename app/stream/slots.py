"""The slot clock: which slot a time falls in, where a slot starts and ends, what may close.

One :class:`SlotClock` per stream (``StreamConfig.slots``) is the only place slot arithmetic is
written; the collect stage, both release drivers and the wire records all go through it.

Slot ``s`` covers ``[s * slot_s, (s + 1) * slot_s)`` in Unix seconds. A slot may close once
the time that proves it complete (an event-time watermark, or the wall clock) has passed its
end plus ``grace_s``. No input may claim a time past :meth:`SlotClock.horizon`, the wall clock
plus the allowed skew (:data:`MAX_SKEW_S` or two slots, whichever is longer): events beyond it
are dead-lettered, progress and slots beyond it refused by the release agent.

The skew cuts both ways: a producer's clock may as well run *behind* the wall by the skew, so
an honest event of slot ``s`` may arrive until the wall clock passes ``end(s)`` plus the skew.
An event-time clock (``clock: event``), which producers drive, is therefore never trusted past
:meth:`SlotClock.settled`, the wall clock minus the skew: an event-time slot closes no earlier
than its due time plus the skew on the wall, whatever any input claims (docs/design.md invariant 7).
A wall-clock slot closes no earlier than its due time.

>>> c = SlotClock(slot_s=2.0, grace_s=0.5)
>>> c.slot_of(10.0), c.start(5), c.end(5)
(5, 10.0, 12.0)
>>> c.last_closable(12.4), c.last_closable(12.5)
(4, 5)
>>> c.horizon(1000.0), c.settled(1000.0)
(1060.0, 940.0)
>>> c.edge(1000.0, "wall"), c.edge(1000.0, "event")
(1000.0, 940.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_SKEW_S = 60.0
"""How far ahead of the wall clock an input's time may be (at least two slots)."""


@dataclass(frozen=True)
class SlotClock:
    """Slot arithmetic of one stream; see the module docstring."""

    slot_s: float
    grace_s: float = 0.0

    def slot_of(self, ts: float) -> int:
        """The slot holding time ``ts``."""
        return math.floor(ts / self.slot_s)

    def start(self, slot: int) -> float:
        return slot * self.slot_s

    def end(self, slot: int) -> float:
        return (slot + 1) * self.slot_s

    def due(self, slot: int) -> float:
        """The time at which ``slot`` may close: its end plus the grace period."""
        return self.end(slot) + self.grace_s

    @property
    def skew_s(self) -> float:
        """How far a producer's clock may be from the wall: :data:`MAX_SKEW_S` or two slots."""
        return max(MAX_SKEW_S, 2 * self.slot_s)

    def horizon(self, now: float) -> float:
        """The latest time any input (an event, a progress tick, a slot) may claim at wall
        time ``now``: a producer's clock may run ahead, but by no more than this."""
        return now + self.skew_s

    def settled(self, now: float) -> float:
        """The latest event time an event-time clock may close slots on at wall time ``now``:
        producers whose clocks run behind by the skew may still send anything after it."""
        return now - self.skew_s

    def edge(self, now: float, clock: str) -> float:
        """The latest time a stream on ``clock`` (``wall`` or ``event``) may have reached at
        wall time ``now``: no slot due after it may close, whatever an input claims."""
        return self.settled(now) if clock == "event" else now

    def last_closable(self, now: float) -> int:
        """The last slot whose end plus grace is at or before ``now``."""
        return math.floor((now - self.grace_s) / self.slot_s) - 1
