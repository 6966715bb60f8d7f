"""The slot release protocol, written once: compute, record, persist, publish, mark, commit.

Both drivers (:mod:`~app.stream.release.central`, :mod:`~app.stream.release.local`) decide
*what* a slot releases; :class:`Publisher` is how it leaves the service:

1. **Compute**: the driver continues the mechanism from the ledger entry's state (cached while
   the entry's ``seq`` is unchanged) and steps it with :meth:`Publisher.rng`, a generator
   derived from ``(noise key, deployment, stream, slot)``: a slot recomputed after a crash
   draws the same noise.
2. **Record**: :meth:`Publisher.release` writes the new entry: mechanism state, ``next_slot``,
   the encoded release and audit records in ``outbox``, ``published = False``.
3. **Persist**: it waits until the broker acknowledged the table's changelog records, so the
   entry survives the loss of the local RocksDB too.
4. **Publish**: it produces the ``outbox`` (key: stream id) and waits for the acknowledgements.
5. **Mark**: it sets ``published = True``.
6. **Commit**: Faust commits the ``partials`` offsets afterwards (at least once).

After a crash anywhere above, the restarted driver finds either the old entry (steps 1-2 not
done: it recomputes from the same inputs and key, hence the same records) or the new one; if
``published`` is false, :meth:`Publisher.recover` re-produces the stored bytes before anything
else. A slot is never noised twice differently, and never published without its ledger entry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import numpy as np

from app import metrics
from app.dp.errors import StateMismatchError
from app.dp.mechanism import Mechanism
from app.dp.noise import keyed_rng
from app.dp.types import Release
from app.stream import status
from app.stream.config import Settings, StreamConfig
from app.stream.errors import ConfigError
from app.stream.records import encode_release
from app.stream.release.entry import LedgerEntry
from app.stream.topics import Topics

log = logging.getLogger(__name__)

Produce = Callable[[str, bytes, bytes], Awaitable[None]]
Persist = Callable[[], Awaitable[None]]


class StateMismatch(ConfigError):
    """A stream's ledger was written by another mechanism or other parameters.

    The worker does not serve the stream (``/readyz`` stays red) rather than continue a ledger
    with a mechanism it does not describe. To change a stream's mechanism, levels or eps, stop
    serving it for ``max w`` slots (remove it from the file) and bring it back under a new id;
    see docs/service.md, "Changing a stream".
    """


def continued(stream: StreamConfig, state: dict[str, Any]) -> Mechanism:
    """The stream's configured mechanism continued from a ledger's ``state``;
    :class:`StateMismatch` if that state was written by another configuration."""
    mech = stream.build_mechanism()
    try:
        mech.load_state(state)
    except StateMismatchError as exc:
        raise StateMismatch(
            f"stream {stream.id}: its ledger does not match the configuration ({exc}); "
            "see docs/service.md, 'Changing a stream'"
        ) from None
    return mech


class Publisher:
    """The shared steps of the slot release protocol; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        ledger: MutableMapping[str, bytes],
        produce: Produce,
        persist: Persist,
    ) -> None:
        self.topics = topics
        self.ledger = ledger
        self.produce = produce
        self.persist = persist
        self.noise_key = settings.require_noise_key()
        self.deployment = settings.deployment
        self._cache: dict[str, tuple[int, Mechanism]] = {}
        self._reported: set[str] = set()

    # -- 1. compute ---------------------------------------------------------------------------
    def rng(self, stream: StreamConfig, slot: int, purpose: str = "") -> np.random.Generator:
        """The noise of ``slot``: keyed by the deployment, the stream and the slot."""
        return keyed_rng(self.noise_key, stream.id + purpose, slot, self.deployment)

    def read(self, sid: str) -> LedgerEntry | None:
        raw = self.ledger.get(sid)
        return LedgerEntry.decode(raw) if raw is not None else None

    def write(self, sid: str, entry: LedgerEntry, mech: Mechanism | None = None) -> None:
        """Store ``entry``; the cached mechanism follows (``mech``: the one it was made from)."""
        old = entry.seq
        entry.seq = old + 1
        self.ledger[sid] = entry.encode()
        cached = self._cache.get(sid)
        if mech is not None:
            self._cache[sid] = (entry.seq, mech)
        elif cached is not None and cached[0] == old:
            self._cache[sid] = (entry.seq, cached[1])

    def mechanism(self, stream: StreamConfig, entry: LedgerEntry | None) -> Mechanism:
        """The stream's mechanism continued from ``entry`` (cached between writes)."""
        if entry is None or entry.state is None:
            return stream.build_mechanism()
        cached = self._cache.get(stream.id)
        if cached is None or cached[0] != entry.seq:
            cached = self._cache[stream.id] = (entry.seq, continued(stream, entry.state))
        return cached[1]

    # -- 2-5. record, persist, publish, mark ----------------------------------------------------
    async def release(
        self,
        stream: StreamConfig,
        mech: Mechanism,
        entry: LedgerEntry,
        slot: int,
        rel: Release,
        recorded: Callable[[], None] | None = None,
        **audit_extra: Any,
    ) -> LedgerEntry:
        """Steps 2-5 for ``rel``, the release of ``slot``; returns the new entry.

        ``recorded`` runs right after the ledger entry is written, before the changelog is
        persisted (the driver drops the slot's inputs there, so both persist together)."""
        sid = stream.id
        window = mech.window_report()
        record, audit, recent = encode_release(
            stream, slot, rel, mech.describe(), window, entry.recent, **audit_extra
        )
        entry.state = mech.state_dict()
        entry.next_slot = slot + 1
        entry.outbox = [("releases", record), ("audit", audit)]
        entry.published = False
        entry.recent = recent
        entry.request, entry.sent = None, True
        self.write(sid, entry, mech)  # 2. Record.
        if recorded is not None:
            recorded()
        await self.persist()  # 3. Persist.
        await self.publish(stream, entry)  # 4. Publish, 5. Mark.
        end = stream.slots.end(slot)
        metrics.RELEASE_LATENCY.labels(sid).observe(max(0.0, time.time() - end))
        metrics.RELEASES.labels(sid, "fresh" if rel.fresh else "approximated").inc()
        metrics.LAST_RELEASE_TIMESTAMP.labels(sid).set(time.time())
        for name, spent in zip(stream.level_names, rel.spent, strict=True):
            metrics.EPSILON_SPENT.labels(sid, name).inc(float(spent))
        self.report(stream, mech, entry)
        log.info("released stream=%s slot=%d fresh=%s status=%s", sid, slot, rel.fresh,
                 rel.status)  # fmt: skip
        return entry

    async def publish(self, stream: StreamConfig, entry: LedgerEntry) -> None:
        """4. Publish the stored bytes (never a recomputation), then 5. mark them published."""
        for role, value in entry.outbox:
            await self.produce(self._topic(role), stream.id.encode(), value)
        entry.published = True
        self.write(stream.id, entry)

    async def recover(self, stream: StreamConfig, entry: LedgerEntry) -> None:
        """After a restart: re-produce what was recorded but maybe not acknowledged."""
        if not entry.published:
            await self.publish(stream, entry)
        if stream.id not in self._reported and entry.state is not None:
            self.report(stream, self.mechanism(stream, entry), entry)

    def _topic(self, role: str) -> str:
        return {
            "releases": self.topics.releases,
            "audit": self.topics.audit,
            "collection-requests": self.topics.collection_requests,
        }[role]

    # -- gauges -------------------------------------------------------------------------------
    def report(self, stream: StreamConfig, mech: Mechanism, entry: LedgerEntry) -> None:
        """Set the budget gauges from the mechanism's ledger (at start and after a release)."""
        self._reported.add(stream.id)
        sid = stream.id
        metrics.SLOT_SECONDS.labels(sid).set(stream.slot_s)
        if entry.next_slot is not None:
            metrics.LAST_RELEASED_SLOT.labels(sid).set(entry.next_slot - 1)
        window = mech.window_report()
        for name, spend in zip(stream.level_names, window, strict=True):
            metrics.WINDOW_BUDGET_SPENT.labels(sid, name).set(float(spend.spent))
            metrics.WINDOW_BUDGET_FRACTION.labels(sid, name).set(spend.fraction)
            metrics.GROUP_EPSILON.labels(sid, name).set(spend.eps)
        published = dict(entry.outbox).get("releases") if entry.published else None
        status.remember(stream, published, window)  # the status page's ring and budget
