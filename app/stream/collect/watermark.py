"""Event-time progress of ``clock: event`` streams, per events partition, bounded by the wall.

An event-clock stream (a replay of recorded data) closes its slots on the event time its data
reached, not on the wall clock. Three rules keep that clock honest (docs/design.md invariant 7):

* **Per partition.** A partition's progress is the largest event time *it* delivered for the
  stream, never another partition's: the release agent closes a slot once every partition passed
  it, so the stream's clock is the minimum over partitions and one producer (all of whose
  records share its key's partition) or one partition cannot move it.
* **Never past the settled wall.** Progress is capped at the wall clock minus the allowed skew
  (:meth:`~app.stream.slots.SlotClock.settled`): a producer stamping ahead (up to the horizon)
  cannot close a slot while producers whose clocks run behind may still send to it honestly.
* **Idle partitions follow.** A partition read to its end that delivered no event of the stream
  for :data:`IDLE_S` (wall seconds) is *idle*: its progress follows the smallest progress of
  the stream's active partitions on this worker, so a partition without data does not hold the
  stream still. When every partition here is idle (all read, nothing pending: a replay that
  ended, producers that stopped), they follow the largest, so the last slots of the quiet
  partitions close too, still never past the settled wall.

Progress never moves back. The state is bookkeeping only (no clock, no Kafka): the collector
feeds it each batch's newest event times and the wall time it saw.

>>> from app.stream.slots import SlotClock
>>> c = EventClocks()
>>> c.saw(0, {"rec": 500.0}, wall=1000.0); c.saw(1, {"rec": 990.0}, wall=1000.0)
>>> clock = SlotClock(slot_s=10.0)
>>> ends = {0: False, 1: False, 2: True}  # partitions read to their ends
>>> c.progress("rec", clock, 0, ends, wall=1000.0)  # its own, not partition 1's
500.0
>>> c.progress("rec", clock, 1, ends, wall=1000.0)  # capped at the settled wall
940.0
>>> c.progress("rec", clock, 2, ends, wall=1020.0)  # idle: follows the slowest active
500.0
>>> ends = dict.fromkeys(ends, True)  # all idle: the stream's data was read to its end
>>> c.progress("rec", clock, 0, ends, wall=1020.0), c.progress("rec", clock, 2, ends, wall=1020.0)
(960.0, 960.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from app.stream.slots import SlotClock

IDLE_S = 10.0
"""A partition at its end without an event of the stream for this long is idle."""


class EventClocks:
    """Per partition and event-clock stream: newest event time, when seen, progress reached."""

    def __init__(self) -> None:
        self.newest: dict[int, dict[str, float]] = {}
        """Per partition, per stream, the largest event time the partition delivered."""
        self.seen_at: dict[int, dict[str, float]] = {}
        """Per partition, per stream, the wall time of its last event."""
        self._reached: dict[int, dict[str, float]] = {}

    def forget(self, partition: int) -> None:
        """A partition (re)assigned or revoked: its next owner replays it from its commit."""
        for table in (self.newest, self.seen_at, self._reached):
            table.pop(partition, None)

    def saw(self, partition: int, newest: Mapping[str, float], wall: float) -> None:
        """A batch of ``partition`` held events of these streams, the newest stamped so."""
        mine = self.newest.setdefault(partition, {})
        seen = self.seen_at.setdefault(partition, {})
        for sid, ts in newest.items():
            if ts > mine.get(sid, -math.inf):
                mine[sid] = ts
            seen[sid] = wall

    def _active(self, sid: str, partition: int, at_end: bool, wall: float) -> bool:
        seen = self.seen_at.get(partition, {}).get(sid, -math.inf)
        return not at_end or wall - seen < IDLE_S

    def progress(
        self, sid: str, clock: SlotClock, partition: int, ends: Mapping[int, bool], wall: float
    ) -> float | None:
        """The event time ``partition`` is complete up to for stream ``sid`` (None: unknown).
        ``ends``: per partition of this worker, whether it was read to its end."""
        own = self.newest.get(partition, {}).get(sid, -math.inf)
        if not self._active(sid, partition, ends.get(partition, False), wall):
            known = {p: newest[sid] for p, newest in self.newest.items() if sid in newest}
            active = [t for p, t in known.items() if self._active(sid, p, ends.get(p, False), wall)]
            own = max(own, min(active) if active else max(known.values(), default=-math.inf))
        reached = self._reached.setdefault(partition, {})
        now = max(reached.get(sid, -math.inf), min(own, clock.settled(wall)))
        if now == -math.inf:
            return None
        reached[sid] = now
        return now
