"""The release stage: merge partials, close slots on the clock, step the mechanism, publish.

:class:`Releaser` holds the logic of the Faust ``release`` agent. It works on two mappings of
``stream id -> msgpack bytes`` — in the worker they are the RocksDB-backed Faust tables
``ledger`` and ``slots``; in ``tests/stream`` they are plain dicts — and on two coroutines
given by the caller: ``produce(topic, key, value)`` that returns once the broker acknowledged
the record, and ``persist()`` that returns once every table changelog write so far is
acknowledged.

Slots close on a timer, not on the next event: every ``partials`` message (a partition's
partial for a closed slot, or a clock tick the ingest service sends several times a slot)
carries its sender's clock, and a slot is released as soon as every events partition reported
it, or when its end + grace + ``release_timeout_s`` has passed, whichever comes first, with
zeros for the partitions that never reported. Every slot is released, in order, empty or not.
A partial for a slot already released is counted as ``late`` and dropped.

A stream's first release is the last slot closable at the moment the agent first hears of it;
earlier partials (a first deployment reading old events) are late.

Messages of ``mode: local`` streams (tallies and ticks from the reports service) go to
:class:`~app.stream.local_release.LocalReleaser`, which shares the tables and the publishing
coroutines.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from app import metrics
from app.dp.noise import keyed_rng
from app.stream.config import Settings, StreamConfig
from app.stream.local_release import LocalReleaser
from app.stream.records import decode_internal, encode_release, pack, unpack
from app.stream.topics import Topics

log = logging.getLogger(__name__)

Produce = Callable[[str, bytes, bytes], Awaitable[None]]
Persist = Callable[[], Awaitable[None]]


@dataclass
class _Cached:
    next_slot: int
    mechanism: Any


def window_report(stream: StreamConfig, mechanism: Any) -> list[tuple[float, float, int]]:
    """Per level: (budget spent in the window of ``w`` slots ending at the last slot, eps, w).

    The mechanism's own exact report (``Mechanism.window_report``); non-personalized
    mechanisms keep one ledger for all levels (the strictest), reported for every level.
    """
    return [(float(x.spent), x.eps, x.w) for x in mechanism.window_report()]


class Releaser:
    """The ``release`` agent's logic; see the module docstring and :meth:`release_slot`."""

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        ledger: MutableMapping[str, bytes],
        slots: MutableMapping[str, bytes],
        produce: Produce,
        persist: Persist,
    ) -> None:
        self.settings = settings
        self.topics = topics
        self.ledger = ledger
        self.slots = slots
        self.produce = produce
        self.persist = persist
        self.noise_key = settings.require_noise_key()
        self.now: dict[str, float] = {}
        self.start_slot: dict[str, int] = {}
        self._cache: dict[str, _Cached] = {}
        self._reported: set[str] = set()
        self.local = LocalReleaser(
            settings, topics, ledger, slots, produce, persist, self.noise_key
        )

    # -- entry point ----------------------------------------------------------------------------
    async def on_message(self, raw: bytes) -> None:
        """Handle one ``partials`` value (a partial or a tick), then close what is due."""
        msg = decode_internal(raw)
        sid = str(msg.get("stream"))
        try:
            stream = self.settings.stream(sid)
        except Exception:  # noqa: BLE001 - a stream removed from the config: nothing to do
            log.warning("partial for unconfigured stream stream=%s", sid)
            return
        now = float(msg["now"])
        self.now[sid] = max(self.now.get(sid, -math.inf), now)
        if stream.local:
            await self.local.on_message(stream, msg, self.now[sid])
            return
        entry = self._entry(sid)
        if entry is not None and not entry["published"]:
            await self._publish(stream, entry)  # recovery: step 4 was interrupted
        if sid not in self._reported and entry is not None:
            self._report(stream, self._mechanism(stream, entry), entry)
        next_slot = self._next_slot(stream, entry)
        if msg.get("kind") == "partial":
            self._merge(stream, msg, next_slot)
        await self._close_due(stream)

    # -- state --------------------------------------------------------------------------------
    def _entry(self, sid: str) -> dict[str, Any] | None:
        raw = self.ledger.get(sid)
        return unpack(raw) if raw is not None else None

    def _next_slot(self, stream: StreamConfig, entry: dict[str, Any] | None) -> int:
        if entry is not None:
            return int(entry["next_slot"])
        if stream.id not in self.start_slot:
            now = self.now[stream.id]
            self.start_slot[stream.id] = math.floor((now - stream.grace_s) / stream.slot_s) - 1
        return self.start_slot[stream.id]

    def _open(self, sid: str) -> dict[int, dict[str, Any]]:
        raw = self.slots.get(sid)
        return {int(k): v for k, v in unpack(raw).items()} if raw is not None else {}

    def _merge(self, stream: StreamConfig, msg: dict[str, Any], next_slot: int) -> None:
        slot, part = int(msg["slot"]), int(msg["partition"])
        counts = msg["counts"]
        if slot < next_slot:
            metrics.LATE_PARTIALS.labels(stream.id).inc()
            metrics.EVENTS.labels(stream.id, "late").inc(sum(counts))
            return
        if len(counts) != len(stream.levels) * stream.d:
            log.error("partial with wrong shape stream=%s slot=%d", stream.id, slot)
            return
        open_slots = self._open(stream.id)
        cur = open_slots.setdefault(
            slot, {"counts": [0] * len(counts), "parts": [], "of": msg["partitions"]}
        )
        if part in cur["parts"]:
            return  # a replayed partial: the first one per (slot, partition) wins
        cur["counts"] = [a + b for a, b in zip(cur["counts"], counts, strict=True)]
        cur["parts"].append(part)
        self.slots[stream.id] = pack(open_slots)

    def _mechanism(self, stream: StreamConfig, entry: dict[str, Any] | None) -> Any:
        cached = self._cache.get(stream.id)
        if entry is None:
            return stream.build_mechanism()
        if cached is None or cached.next_slot != entry["next_slot"]:
            m = stream.build_mechanism()
            m.load_state(entry["state"])
            cached = self._cache[stream.id] = _Cached(int(entry["next_slot"]), m)
        return cached.mechanism

    # -- closing ------------------------------------------------------------------------------
    async def _close_due(self, stream: StreamConfig) -> None:
        now = self.now[stream.id]
        while True:
            entry = self._entry(stream.id)
            slot = self._next_slot(stream, entry)
            end = (slot + 1) * stream.slot_s
            cur = self._open(stream.id).get(slot)
            complete = cur is not None and len(cur["parts"]) >= cur["of"]
            if not complete and now < end + stream.grace_s + stream.release_timeout_s:
                return
            await self.release_slot(stream, slot, entry, cur)

    async def release_slot(
        self,
        stream: StreamConfig,
        slot: int,
        entry: dict[str, Any] | None,
        cur: dict[str, Any] | None,
    ) -> None:
        """Release ``slot`` of ``stream`` exactly once.

        The slot release protocol:

        1. Compute: continue the mechanism from the ledger's state and step it on the slot's
           merged counts (zeros where no partition reported) with
           ``keyed_rng(noise key, stream, slot)``.
        2. Record: write the ledger entry (new mechanism state, ``next_slot = slot + 1``, the
           encoded release and audit records, ``published = False``) and drop the slot from
           the open slots. RocksDB has both at once; their changelog records are queued.
        3. Persist: wait until the broker acknowledged the changelog records, so the ledger
           survives the loss of the local RocksDB too.
        4. Publish: produce the stored release bytes to ``releases`` and the audit bytes to
           ``audit`` (key: stream id) and wait for the acknowledgements.
        5. Mark: set ``published = True`` in the ledger entry.
        6. Commit: Faust commits the ``partials`` offsets afterwards (at least once). After a
           crash anywhere above, the restarted agent finds either the old entry (steps 1-2 not
           done: it recomputes from the same counts and key, hence the same record) or the new
           one; if ``published`` is false it re-produces the stored bytes before anything else,
           so a slot is never noised twice differently, and replayed partials of slots below
           ``next_slot`` are dropped as late.
        """
        sid = stream.id
        # 1. Compute.
        mechanism = self._mechanism(stream, entry)
        if cur is None:
            counts = np.zeros((len(stream.levels), stream.d), dtype=np.int64)
        else:
            counts = np.asarray(cur["counts"], dtype=np.int64).reshape(len(stream.levels), -1)
        started = time.perf_counter()
        population = [lv.population for lv in stream.levels]  # public: never the slot's counts
        rel = mechanism.step(counts, keyed_rng(self.noise_key, sid, slot), population)
        metrics.STEP_SECONDS.labels(sid, stream.mechanism).observe(time.perf_counter() - started)
        end = (slot + 1) * stream.slot_s
        record, audit, recent = encode_release(
            stream,
            slot,
            rel,
            mechanism.describe(),
            window_report(stream, mechanism),
            list(entry["recent"]) if entry else [],
        )
        new_entry = {
            "state": mechanism.state_dict(),
            "next_slot": slot + 1,
            "record": record,
            "audit": audit,
            "published": False,
            "recent": recent,
        }
        # 2. Record.
        self.ledger[sid] = pack(new_entry)
        self._cache[sid] = _Cached(slot + 1, mechanism)
        open_slots = self._open(sid)
        if open_slots.pop(slot, None) is not None or cur is not None:
            self.slots[sid] = pack(open_slots)
        # 3. Persist.
        await self.persist()
        now = time.time()
        if stream.clock == "wall":
            metrics.SLOT_CLOSE_LAG.labels(sid).observe(max(0.0, now - end - stream.grace_s))
        # 4. Publish (5. Mark happens inside).
        await self._publish(stream, new_entry)
        if stream.clock == "wall":
            metrics.RELEASE_LATENCY.labels(sid).observe(max(0.0, time.time() - end))
        metrics.RELEASES.labels(sid, "fresh" if rel.fresh else "approximated").inc()
        metrics.LAST_RELEASE_TIMESTAMP.labels(sid).set(time.time())
        for level, x in zip(stream.levels, rel.spent, strict=True):
            metrics.EPSILON_SPENT.labels(sid, level.name).inc(float(x))
        self._report(stream, mechanism, new_entry)
        log.info(
            "released stream=%s slot=%d fresh=%s status=%s", sid, slot, rel.fresh, rel.status
        )

    async def _publish(self, stream: StreamConfig, entry: dict[str, Any]) -> None:
        # 4. Publish: the stored bytes, never a recomputation.
        await self.produce(self.topics.releases, stream.id.encode(), entry["record"])
        await self.produce(self.topics.audit, stream.id.encode(), entry["audit"])
        # 5. Mark.
        entry["published"] = True
        self.ledger[stream.id] = pack(entry)

    def _report(self, stream: StreamConfig, mechanism: Any, entry: dict[str, Any]) -> None:
        """Set the budget gauges from the ledger (at start and after every release)."""
        self._reported.add(stream.id)
        sid = stream.id
        metrics.SLOT_SECONDS.labels(sid).set(stream.slot_s)
        metrics.LAST_RELEASED_SLOT.labels(sid).set(int(entry["next_slot"]) - 1)
        for level, (spent, eps, _w) in zip(
            stream.levels, window_report(stream, mechanism), strict=True
        ):
            metrics.WINDOW_BUDGET_SPENT.labels(sid, level.name).set(spent)
            metrics.WINDOW_BUDGET_FRACTION.labels(sid, level.name).set(spent / eps)
            metrics.GROUP_EPSILON.labels(sid, level.name).set(eps)
