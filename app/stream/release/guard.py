"""What the release agent refuses from the internal ``partials`` topic.

The collect stages are the only writers of ``partials``, but the topic is a channel like any
other: a corrupt, replayed or forged message must not move a stream's clock, nor claim a
partition the source topic does not have (docs/design.md, invariant 7). Every message is checked
against what the agent knows independently of the message:

* the partition count of the stream's source topic (``events`` for central streams,
  ``reports`` for local ones) from ``topics/``: a message naming another count, or a partition
  outside it, is refused (``partition``);
* the wall clock: a tick claiming progress, or a central partial for a slot that is due, past
  the stream's horizon (the wall clock plus the allowed skew,
  :meth:`~app.stream.slots.SlotClock.horizon`) is refused (``future``). The collect stage never
  sends one: its progress is bounded by the same horizon;
* the stream's shape: a central partial carries ``groups x d`` counts, ints unless the stream
  sums amounts; an open-domain stream takes open partials only, ``groups x keys`` counts and
  keys of at most its ``max_key_chars`` (``shape``);
* what the partition could have accepted (:class:`Capacity`): every value a partial counts is
  one record of its ``events`` partition (a sum stream's, at most ``alpha`` each; an open
  partial's, one kept (user, key) pair: at least one event), every report
  a tally counts one record of its ``reports`` partition, so a message claiming more than the
  partition holds is refused (``capacity``).

A message that does not decode (:class:`~app.stream.internal.InternalError`: wrong types, NaN,
infinite or negative counts, out-of-range slots) is refused as ``malformed``. A refused message
is dropped whole, counted in ``dpstream_internal_refused_total``, logged, and named by
``/readyz`` for :data:`SHOW_S` seconds (:meth:`Guard.reasons`): it is a fault or an attack, and
an operator must look.

>>> from app.stream.slots import SlotClock
>>> g = Guard()
>>> clock = SlotClock(slot_s=1.0)
>>> g.refusal(clock, "central", Tick("s", {0: 99.0}, 4), 4, 100.0)
>>> g.refusal(clock, "central", Tick("s", {0: 9e9}, 4), 4, 100.0)
'future'
>>> g.refusal(clock, "central", Partial("s", 5, 99, 4, [1]), 4, 100.0)
'partition'
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable

from app.stream.config import StreamConfig
from app.stream.internal import Internal, OpenPartial, Partial, PartitionTally, Tick
from app.stream.release.protocol import ReleaseListener
from app.stream.slots import SlotClock

log = logging.getLogger(__name__)

SHOW_S = 60.0
"""How long ``/readyz`` names a stream after it refused an internal message."""


class Guard:
    """Checks ``partials`` messages before a driver sees them; see the module docstring."""

    def __init__(self, watch: ReleaseListener | None = None) -> None:
        self.watch = watch or ReleaseListener()
        """Told each refusal (the release agent's listeners: the metric is theirs)."""
        self.last: dict[str, tuple[float, str]] = {}
        """Per stream, the wall time and reason of its last refusal."""

    def refusal(
        self, clock: SlotClock, mode: str, msg: Internal, partitions: int, now: float
    ) -> str | None:
        """Why ``msg`` must be refused (None: it may be handled). ``mode``: ``central`` or
        ``local``; ``partitions``: the source topic's partition count."""
        if msg.partitions != partitions:
            return "partition"
        claimed = list(msg.progress) if isinstance(msg, Tick) else [msg.partition]
        if not all(0 <= p < partitions for p in claimed):
            return "partition"
        horizon = clock.horizon(now)
        if isinstance(msg, Tick) and not all(
            math.isfinite(t) and t <= horizon for t in msg.progress.values()
        ):
            return "future"
        counted = msg if isinstance(msg, Partial | OpenPartial) else None
        if mode == "central" and counted and clock.due(counted.slot) > horizon:
            return "future"
        return None

    def misfit(self, stream: StreamConfig, msg: Internal) -> str | None:
        """``shape`` if a central partial does not fit ``stream`` (None: it does)."""
        if isinstance(msg, OpenPartial):
            fits = stream.is_open and len(msg.counts) == len(stream.levels) * len(msg.keys)
            too_long = any(len(k) > stream.max_key_chars for k in msg.keys)
            return None if fits and not too_long else "shape"
        if not isinstance(msg, Partial):
            return None
        if stream.is_open:
            return "shape"
        if len(msg.counts) != len(stream.levels) * stream.d:
            return "shape"
        if not stream.sums and not all(isinstance(c, int) for c in msg.counts):
            return "shape"
        return None

    def refuse(self, stream: str, reason: str, msg: Internal | None, now: float) -> None:
        """Count and log a refusal of ``msg`` (None: it did not decode); never its counts,
        they are exact data."""
        self.watch.on_message_refused(stream, reason)
        self.last[stream] = (now, reason)
        log.error(
            "internal message refused stream=%s kind=%s reason=%s partition=%s slot=%s",
            stream,
            type(msg).__name__ if msg else None,
            reason,
            getattr(msg, "partition", None),
            getattr(msg, "slot", None),
        )

    def reasons(self, now: float) -> list[str]:
        """Readiness reasons: the streams that refused a message in the last :data:`SHOW_S`."""
        return [
            f"stream {sid}: refused internal messages ({reason}), see the log"
            for sid, (at, reason) in sorted(self.last.items())
            if now - at <= SHOW_S
        ]


EndOffset = Callable[[str, int], Awaitable[int | None]]
"""``(topic role, partition) ->`` the number of records the partition holds (its end offset),
None when the broker could not say."""


def claimed(stream: StreamConfig, msg: Internal) -> tuple[str, float]:
    """The topic role a message counts records of, and how many records it claims at least."""
    if isinstance(msg, OpenPartial):
        return "events", float(sum(msg.counts))
    if isinstance(msg, Partial):
        total = float(sum(msg.counts))
        return "events", total / stream.alpha if stream.sums and stream.alpha else total
    if isinstance(msg, PartitionTally):
        return "reports", float(max(sum(msg.reports), max(msg.support, default=0)))
    return "events", 0.0


class Capacity:
    """What a partition could have accepted: its end offset (records ever appended), cached and
    read again only when a message claims more than the cached figure (end offsets only grow,
    so a cached one is a lower bound: a message under it fits)."""

    def __init__(self, end_offset: EndOffset | None = None) -> None:
        self.end_offset = end_offset
        self._ends: dict[tuple[str, int], int] = {}

    async def over(self, stream: StreamConfig, msg: Internal) -> bool:
        """Whether ``msg`` claims more records than its partition holds (False when the end
        offset cannot be read: a broker hiccup must not drop honest data)."""
        if self.end_offset is None or isinstance(msg, Tick):
            return False
        role, records = claimed(stream, msg)
        if records <= 0:
            return False
        key = (role, msg.partition)
        if records <= self._ends.get(key, 0):
            return False
        end = await self.end_offset(role, msg.partition)
        if end is None:
            log.warning("end offset unknown role=%s partition=%d", role, msg.partition)
            return False
        self._ends[key] = max(end, self._ends.get(key, 0))
        return records > self._ends[key]
