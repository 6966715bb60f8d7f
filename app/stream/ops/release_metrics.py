"""The release stage's Prometheus figures, as a listener of it.

:class:`ReleaseMetrics` is the :class:`~app.stream.release.protocol.ReleaseListener` the worker
registers with the release agent: per published release the latency, the kind (fresh or
repeated) and the epsilon spent per level; per report the window budget gauges and the last
released slot; per central slot the step time, the close lag, timeouts, late partials (and
their slots, through the worker's one :class:`~app.stream.ops.late.LateSlots`) and the
watermark; per local round the cohort size and the population ledger. Every figure is public
(it follows from the releases, the requests and the configuration) or an operator's (times).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from app import metrics
from app.dp.interfaces import LevelUse
from app.dp.types import Release, WindowSpend
from app.stream.config import StreamConfig
from app.stream.ops.late import LateSlots
from app.stream.release.protocol import ReleaseListener


class ReleaseMetrics(ReleaseListener):
    """Sets ``app.metrics`` from the release stage's notifications; ``late``: the worker's
    late-slot signal, shared with the collect stages."""

    def __init__(self, late: LateSlots | None = None) -> None:
        self.late = late or LateSlots()

    def on_release(self, stream: StreamConfig, released: Sequence[tuple[int, Release]]) -> None:
        sid, now = stream.id, time.time()
        for slot, rel in released:
            metrics.RELEASE_LATENCY.labels(sid).observe(max(0.0, now - stream.slots.end(slot)))
            metrics.RELEASES.labels(sid, "fresh" if rel.fresh else "approximated").inc()
            for name, spent in zip(stream.level_names, rel.spent, strict=True):
                metrics.EPSILON_SPENT.labels(sid, name).inc(float(spent))
        if released:
            metrics.LAST_RELEASE_TIMESTAMP.labels(sid).set(now)

    def on_report(
        self, stream: StreamConfig, window: Sequence[WindowSpend], records: Sequence[bytes]
    ) -> None:
        sid = stream.id
        metrics.SLOT_SECONDS.labels(sid).set(stream.slot_s)
        for name, spend in zip(stream.level_names, window, strict=True):
            metrics.WINDOW_BUDGET_SPENT.labels(sid, name).set(float(spend.spent))
            metrics.WINDOW_BUDGET_FRACTION.labels(sid, name).set(spend.fraction)
            metrics.GROUP_EPSILON.labels(sid, name).set(spend.eps)

    def on_last_slot(self, stream: StreamConfig, slot: int) -> None:
        metrics.LAST_RELEASED_SLOT.labels(stream.id).set(slot)

    def on_step(self, stream: StreamConfig, seconds: float, close_lag_s: float | None) -> None:
        metrics.STEP_SECONDS.labels(stream.id, stream.mechanism).observe(seconds)
        if close_lag_s is not None:
            metrics.SLOT_CLOSE_LAG.labels(stream.id).observe(max(0.0, close_lag_s))

    def on_progress(self, stream: StreamConfig, watermark: float) -> None:
        metrics.WATERMARK.labels(stream.id).set(watermark)

    def on_late(self, stream: StreamConfig, slot: int) -> None:
        metrics.LATE_PARTIALS.labels(stream.id).inc()
        self.late.mark(stream.id, slot)

    def on_forced(self, stream: StreamConfig, slot: int, missing: Sequence[int]) -> None:
        metrics.SLOT_TIMEOUTS.labels(stream.id).inc()

    def on_round(self, stream: StreamConfig, round_name: str, asked: int) -> None:
        metrics.COHORT_SIZE.labels(stream.id, round_name).set(asked)
        metrics.ROUNDS.labels(stream.id, round_name).inc()

    def on_population(
        self, stream: StreamConfig, users: int, available: int, use: LevelUse | None
    ) -> None:
        sid = stream.id
        metrics.USERS_AVAILABLE.labels(sid).set(available)
        metrics.USERS_USED.labels(sid).set(users - available)
        if use is not None:
            for level, n, a in zip(stream.levels, use.users, use.available, strict=True):
                metrics.LEVEL_USERS.labels(sid, level.name).set(n)
                metrics.LEVEL_USERS_AVAILABLE.labels(sid, level.name).set(a)
            metrics.LEVEL_USERS.labels(sid, "(changing)").set(use.sitting_out)

    def on_refused(self, stream: StreamConfig) -> None:
        metrics.MECHANISM_REFUSALS.labels(stream.id).inc()

    def on_message_refused(self, stream: str, reason: str) -> None:
        metrics.INTERNAL_REFUSED.labels(stream, reason).inc()
