"""The release stage: one agent, one protocol, a driver per mode.

- :mod:`~app.stream.release.entry`: the typed ledger entry and its codec;
- :mod:`~app.stream.release.protocol`: the numbered slot release protocol (record, persist,
  publish, mark), written once, with its metrics;
- :mod:`~app.stream.release.guard`: what the agent refuses from the internal topic;
- :mod:`~app.stream.release.central`: closing slots on the partitions' progress (central mode);
- :mod:`~app.stream.release.open`: the same for open-domain streams, whose slots hold key
  counts and whose releases are key -> count maps;
- :mod:`~app.stream.release.local`: collection rounds and releases (local mode).

:class:`Releaser` is the ``release`` agent's logic: it decodes a ``partials`` value and hands
it to the driver of its stream's mode. It works on two mappings of ``stream id -> bytes`` (the
RocksDB-backed tables ``ledger`` and ``slots`` in the worker, dicts in ``tests/stream``) and on
two coroutines: ``produce(topic, key, value)``, which returns once the broker acknowledged the
record, and ``persist()``, which returns once every table changelog write so far is
acknowledged; personalized local streams also take ``preferences(offsets)``, which reads that
topic on (:class:`~app.stream.release.local_levels.PreferenceReader` in the worker).
Operators watch it through ``listeners`` (:class:`ReleaseListener`: the metrics and the status
board of :mod:`app.stream.ops`, which the worker registers); this wing never imports them.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, MutableMapping, Sequence

from app.dp.errors import DPError
from app.stream.config import Settings, StreamConfig
from app.stream.errors import ConfigError
from app.stream.internal import InternalError, StateError, decode
from app.stream.release.central import CentralDriver
from app.stream.release.entry import LedgerEntry
from app.stream.release.guard import Capacity, EndOffset, Guard
from app.stream.release.local import LocalDriver
from app.stream.release.local_levels import ReadPreferences
from app.stream.release.open import OpenDriver, check_sizes
from app.stream.release.protocol import (
    Persist,
    Produce,
    Publisher,
    ReleaseListener,
    StateMismatch,
)
from app.stream.topics import Topics

__all__ = ["LedgerEntry", "Publisher", "ReleaseListener", "Releaser", "StateMismatch"]

log = logging.getLogger(__name__)


class Releaser:
    """The ``release`` agent's logic; see the package docstring."""

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        ledger: MutableMapping[str, bytes],
        slots: MutableMapping[str, bytes],
        produce: Produce,
        persist: Persist,
        clock: Callable[[], float] = time.time,
        preferences: ReadPreferences | None = None,
        listeners: Sequence[ReleaseListener] = (),
        end_offset: EndOffset | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.capacity = Capacity(end_offset)
        self.slots = slots
        self.serving: set[str] = set()
        """Streams this agent heard since its last revocation (their release lag is its to
        export: :meth:`next_slots`)."""
        self._partitions = {
            "central": topics.spec("events").partitions,
            "local": topics.spec("reports").partitions,
        }
        self.publisher = Publisher(settings, topics, ledger, produce, persist, listeners)
        check_sizes(settings.streams, self.publisher.deployment)  # ConfigError: not started
        self.guard = Guard(self.publisher.watch)
        self.central = CentralDriver(self.publisher, slots, clock)
        self.open = OpenDriver(self.publisher, slots, clock)
        self.local = LocalDriver(self.publisher, slots, clock, preferences)
        self.failed: dict[str, str] = {}
        """Streams the agent refuses to serve, with the one-line reason (``/readyz`` shows it)."""

    async def on_message(self, raw: bytes) -> None:
        """Handle one ``partials`` value (a partial, a tally or a tick)."""
        try:
            msg = decode(raw)
        except InternalError as exc:
            log.error("internal message refused: %s", exc)
            self.guard.refuse("", "malformed", None, self.clock())
            return
        sid = msg.stream
        try:
            stream = self.settings.stream(sid)
        except ConfigError:  # a stream removed from the config: nothing to do
            log.warning("partial for unconfigured stream stream=%s", sid)
            return
        if sid in self.failed:
            return
        self.serving.add(sid)
        mode, now = ("local" if stream.local else "central"), self.clock()
        reason = self.guard.refusal(stream.slots, mode, msg, self._partitions[mode], now)
        reason = reason or self.guard.misfit(stream, msg)
        if reason is None and await self.capacity.over(stream, msg):
            reason = "capacity"
        if reason is not None:
            self.guard.refuse(sid, reason, msg, now)
            return
        driver = self.local if stream.local else self.driver(stream)
        dropped: set[str] = set()
        while True:
            try:
                await driver.on_message(stream, msg)
            except StateMismatch as exc:
                self.failed[sid] = str(exc)
                log.error("%s", exc)
            except DPError as exc:  # a mechanism's own check: never stops the worker
                await self._refused(stream, exc)
            except StateError as exc:
                self.guard.refuse(sid, "state", None, now)
                log.error("%s", exc)
                if exc.table != "slots" or exc.key in dropped:
                    # The ledger is the proof of what was spent: without it, never release.
                    self.failed[sid] = f"stream {sid}: {exc}; see docs/service.md, Readiness"
                    return
                dropped.add(exc.key)
                with contextlib.suppress(KeyError):  # not pop(): it would decode the value
                    del self.slots[exc.key]  # its merged counts are lost, counted above
                continue
            return

    async def _refused(self, stream: StreamConfig, exc: DPError) -> None:
        """A mechanism's own check refused a step of ``stream`` (e.g.
        :class:`~app.dp.local.personal_population.PersonalWindowError`): count and log it, then
        close a local slot from the ledger without asking anyone more
        (:meth:`LocalDriver.skip`). A central stream, or a local one whose skip is refused too,
        is no longer served (``/readyz`` says why); the worker and its other streams go on."""
        sid = stream.id
        self.publisher.watch.on_refused(stream)
        self.publisher.forget(sid)
        if not stream.local:
            self._stop_serving(sid, exc)
            return
        try:
            slot = await self.local.skip(stream, self.clock())
        except DPError as again:
            self._stop_serving(sid, again)
            return
        log.error("slot skipped stream=%s slot=%d: the mechanism refused it: %s", sid, slot, exc)

    def _stop_serving(self, sid: str, exc: DPError) -> None:
        self.failed[sid] = f"stream {sid}: the mechanism refused a step: {exc}"
        log.error("%s; the stream is no longer served", self.failed[sid])

    def driver(self, stream: StreamConfig) -> CentralDriver:
        """The driver of a central stream: :attr:`open` for ``domain: open``."""
        return self.open if stream.is_open else self.central

    def reasons(self, now: float) -> list[str]:
        """Readiness reasons of the central drivers (:meth:`CentralDriver.reasons`)."""
        return self.central.reasons(now) + self.open.reasons(now)

    def lag(self, stream: StreamConfig, slot: int, now: float) -> tuple[int, float]:
        """A central stream's release lag on its own clock (:meth:`CentralDriver.lag`)."""
        return self.driver(stream).lag(stream, slot, now)

    def revoked(self) -> None:
        """The agent's partitions were revoked: it serves no stream until it hears one again."""
        self.serving.clear()

    def next_slots(self) -> dict[str, int]:
        """Per stream this agent serves, the first slot it has not closed yet: the ledger's
        ``next_slot``, or before its first close the slot the driver chose to start with."""
        out: dict[str, int] = {}
        for sid in sorted(self.serving):
            if sid in self.publisher.next_slot:
                out[sid] = self.publisher.next_slot[sid]
            elif sid in self.central.start_slot:
                out[sid] = self.central.start_slot[sid]
            elif sid in self.open.start_slot:
                out[sid] = self.open.start_slot[sid]
            elif sid in self.local.start_slot:
                out[sid] = self.local.start_slot[sid]
        return out
