"""The release protocol's Prometheus figures, as a listener of it.

:class:`ReleaseMetrics` is the :class:`~app.stream.release.protocol.ReleaseListener` that the
release agent always has: per published release the latency, the kind (fresh or repeated) and
the epsilon spent per level, and per report the window budget gauges and the last released slot.
Every figure is public (it follows from the releases and the configuration).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from app import metrics
from app.dp.types import Release, WindowSpend
from app.stream.config import StreamConfig


class ReleaseMetrics:
    """Sets ``app.metrics`` from the release protocol's notifications."""

    def on_release(self, stream: StreamConfig, released: Sequence[tuple[int, Release]]) -> None:
        """Releases of ``stream`` were published and marked (step 5)."""
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
        """The stream's ledger was reported (at start, and after every release)."""
        sid = stream.id
        metrics.SLOT_SECONDS.labels(sid).set(stream.slot_s)
        for name, spend in zip(stream.level_names, window, strict=True):
            metrics.WINDOW_BUDGET_SPENT.labels(sid, name).set(float(spend.spent))
            metrics.WINDOW_BUDGET_FRACTION.labels(sid, name).set(spend.fraction)
            metrics.GROUP_EPSILON.labels(sid, name).set(spend.eps)

    def on_last_slot(self, stream: StreamConfig, slot: int) -> None:
        """The last slot the stream's ledger says was released."""
        metrics.LAST_RELEASED_SLOT.labels(stream.id).set(slot)
