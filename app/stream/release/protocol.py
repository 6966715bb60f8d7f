"""The slot release protocol, written once: compute, record, persist, publish, mark, commit.

Both drivers (:mod:`~app.stream.release.central`, :mod:`~app.stream.release.local`) decide
*what* a slot releases; :class:`Publisher` is how it leaves the service:

1. **Compute**: the driver continues the mechanism from the ledger entry's state (cached while
   the entry's ``seq`` is unchanged) and steps it with :meth:`Publisher.rng`, a generator
   derived from ``(noise key, deployment, stream, slot)``: a slot recomputed after a crash
   draws the same noise.
2. **Record**: :meth:`Publisher.release` writes the new entry: mechanism state, ``next_slot``,
   the encoded release and audit records in ``outbox``, ``published = False``. A period
   mechanism (:mod:`app.dp.period`) releases nothing inside a period (the entry then only
   carries its state, whose buffer holds the period's true histograms, and an empty outbox)
   and the period's ``W`` slots at its end: all ``W`` releases are in this one entry before
   the first is produced; those of earlier slots say ``delayed``.
3. **Persist**: it waits until the broker acknowledged the table's changelog records, so the
   entry survives the loss of the local RocksDB too.
4. **Publish**: it produces the ``outbox`` (key: stream id; the release and audit topics side by
   side, each in order) and waits for every acknowledgement.
5. **Mark**: it sets ``published = True``.
6. **Commit**: Faust commits the ``partials`` offsets afterwards (at least once).

Then the publisher notifies its listeners (:class:`ReleaseListener`, the drivers too through
:attr:`Publisher.watch`): the worker registers the operations wing's Prometheus figures and
status board. Listeners only observe: nothing they do feeds back into the protocol.

After a crash anywhere above, the restarted driver finds either the old entry (steps 1-2 not
done: it recomputes from the same inputs and key, hence the same histograms; only
``released_at`` may differ, for records no one has seen) or the new one; if
``published`` is false, :meth:`Publisher.recover` re-produces the stored bytes before anything
else. A slot is never noised twice differently, and never published without its ledger entry.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

import numpy as np

from app.dp.errors import StateMismatchError
from app.dp.interfaces import LevelUse
from app.dp.mechanism import Mechanism
from app.dp.noise import keyed_rng
from app.dp.open import OpenRelease
from app.dp.types import Release, WindowSpend
from app.stream.config import Settings, StreamConfig
from app.stream.errors import ConfigError
from app.stream.records import encode_open_release, encode_release
from app.stream.release import faults
from app.stream.release.entry import LedgerEntry
from app.stream.topics import Topics

log = logging.getLogger(__name__)

Produce = Callable[[str, bytes, bytes], Awaitable[None]]
Persist = Callable[[], Awaitable[None]]
Released = Release | OpenRelease
"""What a driver releases: a labels stream's histogram or an open stream's key -> count map."""


class ReleaseListener:
    """What the release stage tells its observers: the operations wing's metrics and status
    board, registered at wiring time (:mod:`app.stream.worker`).

    Every method does nothing here; a listener overrides what it watches. Listeners only
    observe: nothing they do feeds back into the protocol, and the release wing never imports
    what listens. Every figure passed is public (it follows from the releases, the requests and
    the configuration) or an operator's (times), never a count of the data.
    """

    def on_release(self, stream: StreamConfig, released: Sequence[tuple[int, Release]]) -> None:
        """Releases of ``stream`` were published and marked (steps 4-5)."""

    def on_report(
        self, stream: StreamConfig, window: Sequence[WindowSpend], records: Sequence[bytes]
    ) -> None:
        """The stream's ledger was reported: its window budget after the published
        ``records`` (``releases`` values; none at start or before a period's end)."""

    def on_last_slot(self, stream: StreamConfig, slot: int) -> None:
        """The last slot the stream's ledger says was released."""

    def on_step(self, stream: StreamConfig, seconds: float, close_lag_s: float | None) -> None:
        """A central slot was stepped in ``seconds``; ``close_lag_s``: how long after its due
        time (wall-clock streams; None on ``clock: event``)."""

    def on_progress(self, stream: StreamConfig, watermark: float) -> None:
        """Every partition of a central stream reported progress; the least of them."""

    def on_late(self, stream: StreamConfig, slot: int) -> None:
        """A partial for the released ``slot`` was dropped, discarding values (late data)."""

    def on_forced(self, stream: StreamConfig, slot: int, missing: Sequence[int]) -> None:
        """``slot`` was closed without the ``missing`` partitions (a timeout)."""

    def on_round(self, stream: StreamConfig, round_name: str, asked: int) -> None:
        """A local stream's collection request was acknowledged: ``asked`` users."""

    def on_population(
        self, stream: StreamConfig, users: int, available: int, use: LevelUse | None
    ) -> None:
        """A population-division stream's ledger: of its registered ``users``, those who may
        report now, and per level."""

    def on_refused(self, stream: StreamConfig) -> None:
        """The stream's mechanism refused a step (its own check)."""

    def on_message_refused(self, stream: str, reason: str) -> None:
        """The guard refused an internal message of ``stream`` ("" when it did not decode)."""


class Listeners(ReleaseListener):
    """Every registered listener as one (the publisher's :attr:`Publisher.watch`): what the
    publisher and the drivers tell, told to each in the order registered."""

    def __init__(self, listeners: Sequence[ReleaseListener] = ()) -> None:
        self.each = tuple(listeners)

    def on_release(self, stream: StreamConfig, released: Sequence[tuple[int, Release]]) -> None:
        for listener in self.each:
            listener.on_release(stream, released)

    def on_report(
        self, stream: StreamConfig, window: Sequence[WindowSpend], records: Sequence[bytes]
    ) -> None:
        for listener in self.each:
            listener.on_report(stream, window, records)

    def on_last_slot(self, stream: StreamConfig, slot: int) -> None:
        for listener in self.each:
            listener.on_last_slot(stream, slot)

    def on_step(self, stream: StreamConfig, seconds: float, close_lag_s: float | None) -> None:
        for listener in self.each:
            listener.on_step(stream, seconds, close_lag_s)

    def on_progress(self, stream: StreamConfig, watermark: float) -> None:
        for listener in self.each:
            listener.on_progress(stream, watermark)

    def on_late(self, stream: StreamConfig, slot: int) -> None:
        for listener in self.each:
            listener.on_late(stream, slot)

    def on_forced(self, stream: StreamConfig, slot: int, missing: Sequence[int]) -> None:
        for listener in self.each:
            listener.on_forced(stream, slot, missing)

    def on_round(self, stream: StreamConfig, round_name: str, asked: int) -> None:
        for listener in self.each:
            listener.on_round(stream, round_name, asked)

    def on_population(
        self, stream: StreamConfig, users: int, available: int, use: LevelUse | None
    ) -> None:
        for listener in self.each:
            listener.on_population(stream, users, available, use)

    def on_refused(self, stream: StreamConfig) -> None:
        for listener in self.each:
            listener.on_refused(stream)

    def on_message_refused(self, stream: str, reason: str) -> None:
        for listener in self.each:
            listener.on_message_refused(stream, reason)


def observed(rel: Released) -> Release:
    """What listeners see of a release: an open stream's as a :class:`Release` whose
    ``histogram`` holds its counts in key order and whose ``spent`` (all of it on
    ``spent_pub``: one total per level) is the slot's eps; its keys stay in the records."""
    if not isinstance(rel, OpenRelease):
        return rel
    return Release(
        slot=rel.slot,
        histogram=rel.counts.astype(np.float64),
        fresh=rel.fresh,
        status=rel.status,
        spent_dc=np.zeros(len(rel.eps_spent)),
        spent_pub=rel.spent,
        mechanism=rel.mechanism,
        version=rel.version,
        spent_exact=rel.eps_spent,
    )


class StateMismatch(ConfigError):
    """A stream's ledger was written by another mechanism or other parameters.

    The worker does not serve the stream (``/readyz`` stays red) rather than continue a ledger
    with a mechanism it does not describe. To change a stream's mechanism, levels or eps, stop
    serving it for ``max w`` slots (remove it from the file) and bring it back under a new id;
    see docs/service.md, "Changing a stream".
    """


def slot_rng(
    key: bytes, deployment: str, stream: StreamConfig, slot: int, purpose: str = ""
) -> np.random.Generator:
    """The noise of ``slot`` of ``stream`` under ``(key, deployment)``: what
    :meth:`Publisher.rng` draws, and ``dpstream replay`` with the deployment's key."""
    return keyed_rng(key, stream.id + purpose, slot, deployment)


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
        listeners: Sequence[ReleaseListener] = (),
    ) -> None:
        self.topics = topics
        self.watch = Listeners(listeners)
        """The listeners as one: the drivers tell them through it too."""
        self.ledger = ledger
        self.produce = produce
        self.persist = persist
        self.noise_key = settings.require_noise_key()
        self.deployment = settings.deployment
        self._cache: dict[str, tuple[int, Mechanism]] = {}
        self._reported: set[str] = set()
        self.next_slot: dict[str, int] = {}
        """Per stream, the ledger's ``next_slot`` as last read or written (the release lag)."""

    # -- 1. compute ---------------------------------------------------------------------------
    def rng(self, stream: StreamConfig, slot: int, purpose: str = "") -> np.random.Generator:
        """The noise of ``slot``: keyed by the deployment, the stream and the slot."""
        return slot_rng(self.noise_key, self.deployment, stream, slot, purpose)

    def read(self, sid: str) -> LedgerEntry | None:
        raw = self.ledger.get(sid)
        entry = LedgerEntry.decode(raw, sid) if raw is not None else None
        if entry is not None and entry.next_slot is not None:
            self.next_slot[sid] = entry.next_slot
        return entry

    def write(self, sid: str, entry: LedgerEntry, mech: Mechanism | None = None) -> None:
        """Store ``entry``; the cached mechanism follows (``mech``: the one it was made from)."""
        old = entry.seq
        entry.seq = old + 1
        self.ledger[sid] = entry.encode()
        if entry.next_slot is not None:
            self.next_slot[sid] = entry.next_slot
        cached = self._cache.get(sid)
        if mech is not None:
            self._cache[sid] = (entry.seq, mech)
        elif cached is not None and cached[0] == old:
            self._cache[sid] = (entry.seq, cached[1])

    def forget(self, sid: str) -> None:
        """Drop the cached mechanism of ``sid`` (one a refused step left half-stepped): the
        next :meth:`mechanism` continues from the ledger."""
        self._cache.pop(sid, None)

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
        releases: Sequence[tuple[int, Released]],
        recorded: Callable[[], None] | None = None,
        released_at: float | None = None,
        **audit_extra: Any,
    ) -> LedgerEntry:
        """Steps 2-5 after ``slot`` was stepped; returns the new entry.

        ``releases`` are the ``(slot, release)`` pairs that became known at ``slot``: one for
        a per-slot mechanism, none inside a period and the whole period at its end for a
        period mechanism (:mod:`app.dp.period`). All of them are recorded in the entry's
        ``outbox`` before any is produced; a pair for an earlier slot is marked ``delayed``.
        ``released_at`` is when they were computed (None: now). ``recorded`` runs right after
        the ledger entry is written, before the changelog is persisted (the driver drops the
        slot's inputs there, so both persist together)."""
        sid = stream.id
        released_at = time.time() if released_at is None else released_at
        window = mech.window_report()
        outbox: list[tuple[str, bytes]] = []
        recent = entry.recent
        for rel_slot, rel in releases:
            if isinstance(rel, OpenRelease):
                record, audit, recent = encode_open_release(
                    stream,
                    rel_slot,
                    rel,
                    mech.describe(),
                    window,
                    recent,
                    released_at=released_at,
                    deployment=self.deployment,
                )
                outbox += [("releases", record), ("audit", audit)]
                continue
            record, audit, recent = encode_release(
                stream,
                rel_slot,
                rel,
                mech.describe(),
                window,
                recent,
                released_at=released_at,
                delayed=rel_slot < slot,
                deployment=self.deployment,
                **audit_extra,
            )
            outbox += [("releases", record), ("audit", audit)]
        entry.state = mech.state_dict()
        entry.next_slot = slot + 1
        entry.outbox = outbox
        entry.published = not outbox
        entry.recent = recent
        entry.local.request, entry.local.sent = None, True
        self.write(sid, entry, mech)  # 2. Record.
        if recorded is not None:
            recorded()
        await self.persist()  # 3. Persist.
        if len(releases) > 1:
            faults.after_period_record()  # tests only: kill -9 here on request
        if outbox:
            await self.publish(stream, entry)  # 4. Publish, 5. Mark.
        for rel_slot, rel in releases:
            log.info(
                "released stream=%s slot=%d fresh=%s status=%s delayed=%s",
                sid,
                rel_slot,
                rel.fresh,
                rel.status,
                rel_slot < slot,
            )
        self.watch.on_release(stream, [(s, observed(rel)) for s, rel in releases])
        self.report(stream, mech, entry)
        return entry

    async def publish(self, stream: StreamConfig, entry: LedgerEntry) -> None:
        """4. Publish the stored bytes (never a recomputation), then 5. mark them published.

        The topics are produced side by side, each in the outbox's order: a slot's release and
        its audit record wait for their acknowledgements together (one round trip, not two).
        The entry is marked only once every record was acknowledged; if any failed, the first
        failure is raised after the others have finished and the entry stays unmarked, so
        :meth:`recover` re-sends the same bytes (consumers may see a record twice, identical).
        """
        key = stream.id.encode()
        by_topic: dict[str, list[bytes]] = {}
        for role, value in entry.outbox:
            by_topic.setdefault(self._topic(role), []).append(value)

        async def in_order(topic: str, values: list[bytes]) -> None:
            for value in values:
                await self.produce(topic, key, value)

        done = await asyncio.gather(
            *(in_order(t, v) for t, v in by_topic.items()), return_exceptions=True
        )
        for outcome in done:
            if isinstance(outcome, BaseException):
                raise outcome
        entry.published = True
        self.write(stream.id, entry)

    async def recover(self, stream: StreamConfig, entry: LedgerEntry) -> None:
        """After a restart: re-produce what was recorded but maybe not acknowledged."""
        if not entry.published:
            await self.publish(stream, entry)
        if stream.id not in self._reported and entry.state is not None:
            self.report(stream, self.mechanism(stream, entry), entry)

    def _topic(self, role: str) -> str:
        return self.topics.name(role)

    # -- listeners ----------------------------------------------------------------------------
    def report(self, stream: StreamConfig, mech: Mechanism, entry: LedgerEntry) -> None:
        """Tell the listeners the stream's window budget and its published records (at start
        and after a release)."""
        self._reported.add(stream.id)
        if entry.recent:  # a period mechanism has stepped past slots it has not released yet
            self.watch.on_last_slot(stream, int(entry.recent[-1][0]))
        window = mech.window_report()
        published = [v for role, v in entry.outbox if role == "releases" and entry.published]
        self.watch.on_report(stream, window, published)
