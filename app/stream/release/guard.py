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
  sends one: its progress is bounded by the same horizon.

A message that does not decode (:class:`~app.stream.internal.InternalError`) is refused as
``malformed``. A refused message is dropped whole, counted in
``dpstream_internal_refused_total``, logged, and named by ``/readyz`` for :data:`SHOW_S` seconds
(:meth:`Guard.reasons`): it is a fault or an attack, and an operator must look.

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

from app import metrics
from app.stream.internal import Internal, Partial, Tick
from app.stream.slots import SlotClock

log = logging.getLogger(__name__)

SHOW_S = 60.0
"""How long ``/readyz`` names a stream after it refused an internal message."""


class Guard:
    """Checks ``partials`` messages before a driver sees them; see the module docstring."""

    def __init__(self) -> None:
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
        if mode == "central" and isinstance(msg, Partial) and clock.due(msg.slot) > horizon:
            return "future"
        return None

    def refuse(self, stream: str, reason: str, msg: Internal | None, now: float) -> None:
        """Count and log a refusal of ``msg`` (None: it did not decode); never its counts,
        they are exact data."""
        metrics.INTERNAL_REFUSED.labels(stream, reason).inc()
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
