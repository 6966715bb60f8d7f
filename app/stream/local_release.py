"""The release stage of local mode: issue collection requests, close rounds, release slots.

:class:`LocalReleaser` is the ``release`` agent's logic for ``mode: local`` streams (the
central :class:`~app.stream.release.Releaser` hands their messages over). It works on the same
two mappings (``ledger`` and ``slots``: stream id -> msgpack bytes) and the same ``produce`` /
``persist`` coroutines, so it runs on dicts in ``tests/stream`` and on the RocksDB tables in the
worker. Its clock is the wall clock (:attr:`LocalReleaser.clock`), never behind the ``now`` of
the ticks and tallies the reports service sends several times per round: those wake the agent,
but after a restart Faust first reads a backlog of old ticks, whose times would send requests
with deadlines already past.

Slots follow the wall clock: slot ``s`` covers ``[s slot_s, (s + 1) slot_s)``. The mechanism
numbers its own slots ``1, 2, ...`` (``t``, the slot devices put in their ledgers); the ledger
keeps ``offset`` with ``s = offset + t``, and every wall slot from the first one on gets exactly
one mechanism slot, so ``t`` never skips. The first slot is the first one that starts after the
agent first hears of the stream. A slot the service could not run in time (the worker was down
or behind until less than ``round_s`` was left) is still stepped, with empty tallies and no
request sent: the mechanism repeats its last release and marks the cohort it planned as used,
which only costs utility.

The ledger entry of a local stream adds to the central one (``state``, ``next_slot``,
``record``, ``audit``, ``published``, ``recent``): ``offset``; ``request``, the encoded
``collection-requests`` value of the pending round (None when no round is pending);
``sent``, whether the broker acknowledged it; and ``deadline``. The ``slots`` entry holds the
merged tally of the pending round: support, reports per group, and the partitions that sent it.
Sizes: the state carries the population ledger (4 bytes per bucket) and the pending cohort; the
request carries a bitmap of ``ceil(buckets / 8)`` bytes (8 KiB for ``2**16`` buckets).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import MutableMapping
from typing import Any

import numpy as np

from app import metrics
from app.dp.errors import DPError
from app.dp.local.base import CollectionRequest, Tally, mask_users
from app.dp.noise import keyed_rng
from app.stream.config import Settings, StreamConfig
from app.stream.records import encode_release, encode_request, pack, unpack
from app.stream.topics import Topics

log = logging.getLogger(__name__)


class LocalReleaser:
    """The ``release`` agent's logic for local streams; see :meth:`run_slot`."""

    def __init__(
        self,
        settings: Settings,
        topics: Topics,
        ledger: MutableMapping[str, bytes],
        slots: MutableMapping[str, bytes],
        produce: Any,
        persist: Any,
        noise_key: bytes,
    ) -> None:
        self.settings = settings
        self.topics = topics
        self.ledger = ledger
        self.slots = slots
        self.produce = produce
        self.persist = persist
        self.noise_key = noise_key
        self.start_slot: dict[str, int] = {}
        self.woke: dict[str, float] = {}
        """Per stream, the clock at this process's first message (see :meth:`_round_due`)."""
        self._cache: dict[str, tuple[int, Any]] = {}
        self.clock = time.time
        """The wall clock (tests replace it)."""

    # -- entry point ----------------------------------------------------------------------------
    async def on_message(self, stream: StreamConfig, msg: dict[str, Any], now: float) -> None:
        """Handle one ``partials`` value of a local stream (a tally or a tick)."""
        now = max(now, self.clock())
        self.woke.setdefault(stream.id, now)
        entry = self._entry(stream.id)
        if entry is not None:
            await self._recover(stream, entry)
        if msg.get("kind") == "tally":
            self._merge(stream, entry, msg)
        await self.run_slot(stream, now)

    # -- state --------------------------------------------------------------------------------
    def _entry(self, sid: str) -> dict[str, Any] | None:
        raw = self.ledger.get(sid)
        return unpack(raw) if raw is not None else None

    def _write(self, sid: str, entry: dict[str, Any], mech: Any = None) -> None:
        """Store ``entry``; the cached mechanism follows (``mech``: the one it was made from)."""
        old = int(entry.get("seq", 0))
        entry["seq"] = old + 1
        self.ledger[sid] = pack(entry)
        cached = self._cache.get(sid)
        if mech is not None:
            self._cache[sid] = (old + 1, mech)
        elif cached is not None and cached[0] == old:
            self._cache[sid] = (old + 1, cached[1])

    def _mechanism(self, stream: StreamConfig, entry: dict[str, Any] | None) -> Any:
        if entry is None:
            return stream.build_mechanism()
        cached = self._cache.get(stream.id)
        if cached is None or cached[0] != entry["seq"]:
            m = stream.build_mechanism()
            m.load_state(entry["state"])
            cached = self._cache[stream.id] = (int(entry["seq"]), m)
        return cached[1]

    def _pending(self, entry: dict[str, Any] | None) -> CollectionRequest | None:
        if entry is None or entry.get("request") is None:
            return None
        return CollectionRequest.from_dict(unpack(entry["request"])["request"])

    def _merge(
        self, stream: StreamConfig, entry: dict[str, Any] | None, msg: dict[str, Any]
    ) -> None:
        pending = self._pending(entry)
        slot, rnd, part = int(msg["slot"]), str(msg["round"]), int(msg["partition"])
        if pending is None or (pending.slot, pending.round) != (slot, rnd):
            return  # a replayed tally of a closed round, or one that came after its timeout
        support, reports = msg["support"], msg["reports"]
        m = len(pending.oracle)
        if len(support) != m * stream.d or len(reports) != m:
            log.error("tally with wrong shape stream=%s slot=%d round=%s", stream.id, slot, rnd)
            return
        raw = self.slots.get(stream.id)
        cur = unpack(raw) if raw is not None else None
        if cur is None or (cur["slot"], cur["round"]) != (slot, rnd):
            cur = {"slot": slot, "round": rnd, "support": [0] * len(support),
                   "reports": [0] * m, "parts": [], "of": int(msg["partitions"])}  # fmt: skip
        if part in cur["parts"]:
            return  # the first tally per (round, partition) wins
        cur["support"] = [a + b for a, b in zip(cur["support"], support, strict=True)]
        cur["reports"] = [a + b for a, b in zip(cur["reports"], reports, strict=True)]
        cur["parts"].append(part)
        self.slots[stream.id] = pack(cur)

    # -- the protocol -------------------------------------------------------------------------
    async def run_slot(self, stream: StreamConfig, now: float) -> None:
        """Advance the stream's local slot protocol as far as ``now`` allows.

        The local slot protocol (the central :meth:`~app.stream.release.Releaser.release_slot`
        is steps 7-11):

        1. Open: at the start of slot ``s = next_slot`` (wall clock), continue the mechanism
           from the ledger's state and call ``open_slot(keyed_rng(key, stream, s))``; it plans
           the first round (its cohort is taken from the population ledger, or its budget
           from the window ledger) and returns the request, or None (no round this slot:
           go to 6).
        2. Record: write the ledger entry with the new mechanism state (the pending request is
           part of it), the encoded ``collection-requests`` value, its ``deadline`` (now +
           ``round_s``) and ``sent = False``.
        3. Persist: wait until the changelog has the entry. From here on a restart re-sends
           these stored bytes and never plans another cohort for the slot and round.
        4. Ask: produce the stored request (key: stream id), wait for the ack, set
           ``sent = True``.
        5. Collect: devices answer on ``reports``; the reports service tallies each partition
           and sends its tally after the deadline. The round closes when every partition sent
           one, or at ``deadline + release_timeout_s`` (zeros for the missing partitions).
           ``on_tally(merged tally, keyed_rng(key, stream + "/tally", s))`` returns a second
           request (go to 2: same rule) or None.
        6. Close: ``close_slot()`` gives the slot's release (frequencies).
        7-11. Release as in the central protocol: record the ledger entry with the new state,
           ``next_slot = s + 1``, the encoded release and audit, ``published = False`` and no
           pending request; persist; produce the stored bytes to ``releases`` and ``audit``;
           mark ``published``; Faust commits the ``partials`` offsets. A restart re-produces
           what was recorded but not acknowledged (:meth:`_recover`), byte for byte.

        A slot whose start was missed by more than ``slot_s - round_s`` runs steps 1, 5 and 6
        with empty tallies and sends nothing (see the module docstring).
        """
        sid = stream.id
        while True:
            entry = self._entry(sid)
            mech = self._mechanism(stream, entry)
            slot = self._next_slot(stream, entry, now)
            pending = self._pending(entry)
            if pending is not None:
                assert entry is not None
                if not self._round_due(stream, entry, now):
                    return
                # 5. Collect: the merged tally of the round.
                tally = self._tally(stream, pending)
                nxt = self._on_tally(mech, tally, sid, slot)
                self.slots.pop(sid, None)
                if nxt is not None:
                    await self._ask(stream, mech, entry, slot, nxt, now)
                    continue
            else:
                start = slot * stream.slot_s
                if now < start:
                    return
                offset = slot - (mech.t + 1)
                entry = entry if entry is not None else {"offset": offset}
                # 1. Open.
                request = mech.open_slot(keyed_rng(self.noise_key, sid, slot))
                if now >= start + stream.slot_s - stream.round_s:
                    log.warning("slot missed stream=%s slot=%d: stepped without reports",
                                sid, slot)  # fmt: skip
                    while request is not None:
                        empty = Tally(request.slot, request.round,
                                      np.zeros((len(request.oracle), stream.d), dtype=np.int64),
                                      np.zeros(len(request.oracle), dtype=np.int64))  # fmt: skip
                        request = self._on_tally(mech, empty, sid, slot)
                elif request is not None:
                    await self._ask(stream, mech, entry, slot, request, now)
                    continue
            # 6. Close.
            await self._release(stream, mech, entry, slot)

    def _next_slot(self, stream: StreamConfig, entry: dict[str, Any] | None, now: float) -> int:
        if entry is not None and "next_slot" in entry:
            return int(entry["next_slot"])
        if stream.id not in self.start_slot:
            self.start_slot[stream.id] = math.floor(now / stream.slot_s) + 1
        return self.start_slot[stream.id]

    def _round_due(self, stream: StreamConfig, entry: dict[str, Any], now: float) -> bool:
        """Whether the pending round closes: every partition's tally came, or it timed out.

        The timeout runs from the deadline, or from this process's first message if that is
        later: a round pending across a restart gets ``release_timeout_s`` for the reports
        service to replay its reports (durable in ``reports``, already spent on the devices)
        instead of closing at once with zeros.
        """
        raw = self.slots.get(stream.id)
        cur = unpack(raw) if raw is not None else None
        complete = cur is not None and len(cur["parts"]) >= cur["of"]
        since = max(float(entry["deadline"]), self.woke.get(stream.id, 0.0))
        return complete or now >= since + stream.release_timeout_s

    def _tally(self, stream: StreamConfig, pending: CollectionRequest) -> Tally:
        m = len(pending.oracle)
        raw = self.slots.get(stream.id)
        cur = unpack(raw) if raw is not None else None
        if cur is None or (cur["slot"], cur["round"]) != (pending.slot, pending.round):
            support, reports = [0] * (m * stream.d), [0] * m
        else:
            support, reports = cur["support"], cur["reports"]
            if len(cur["parts"]) < cur["of"]:
                log.warning("round timed out stream=%s slot=%d round=%s partitions=%d/%d",
                            stream.id, pending.slot, pending.round, len(cur["parts"]),
                            cur["of"])  # fmt: skip
        return Tally(pending.slot, pending.round,
                     np.asarray(support, dtype=np.int64).reshape(m, stream.d),
                     np.asarray(reports, dtype=np.int64))  # fmt: skip

    def _on_tally(self, mech: Any, tally: Tally, sid: str, slot: int) -> CollectionRequest | None:
        rng = keyed_rng(self.noise_key, sid + "/tally", slot)
        try:
            out: CollectionRequest | None = mech.on_tally(tally, rng)
        except DPError as exc:  # a tally the mechanism refuses (a bug upstream): count nobody
            log.error("tally refused stream=%s slot=%d: %s", sid, slot, exc)
            empty = Tally(tally.slot, tally.round, np.zeros_like(tally.support),
                          np.zeros_like(tally.reports))  # fmt: skip
            out = mech.on_tally(empty, rng)
        return out

    async def _ask(
        self,
        stream: StreamConfig,
        mech: Any,
        entry: dict[str, Any],
        slot: int,
        request: CollectionRequest,
        now: float,
    ) -> None:
        sid = stream.id
        deadline = max(now, slot * stream.slot_s) + stream.round_s
        value = encode_request(stream, slot, deadline, request.to_dict())
        # 2. Record.
        new = {**entry, "state": mech.state_dict(), "next_slot": slot, "request": value,
               "sent": False, "deadline": deadline}  # fmt: skip
        new.setdefault("published", True)
        new.setdefault("recent", [])
        self._write(sid, new, mech)
        # 3. Persist.
        await self.persist()
        # 4. Ask (and mark sent).
        await self._send_request(stream, new)
        asked = int(mask_users(request, stream.users).sum())
        metrics.COHORT_SIZE.labels(sid, request.round).set(asked)
        metrics.ROUNDS.labels(sid, request.round).inc()
        self._report_population(stream, mech)
        log.info("asked stream=%s slot=%d round=%s users=%d", sid, slot, request.round, asked)

    async def _send_request(self, stream: StreamConfig, entry: dict[str, Any]) -> None:
        await self.produce(self.topics.collection_requests, stream.id.encode(), entry["request"])
        entry["sent"] = True
        self._write(stream.id, entry)

    async def _recover(self, stream: StreamConfig, entry: dict[str, Any]) -> None:
        """After a restart: re-produce what was recorded but maybe not acknowledged."""
        if not entry.get("published", True):
            await self._publish(stream, entry)
        if entry.get("request") is not None and not entry.get("sent", True):
            await self._send_request(stream, entry)

    async def _release(
        self, stream: StreamConfig, mech: Any, entry: dict[str, Any] | None, slot: int
    ) -> None:
        from app.stream.release import window_report

        sid = stream.id
        rel = mech.close_slot()
        end = (slot + 1) * stream.slot_s
        base = entry or {"offset": slot - mech.t}
        record, audit, recent = encode_release(
            stream, slot, rel, mech.describe(), window_report(stream, mech),
            base.get("recent", []), users_dc=int(rel.users_dc), users_pub=int(rel.users_pub),
        )  # fmt: skip
        # 7. Record.
        new = {**base, "state": mech.state_dict(), "next_slot": slot + 1, "record": record,
               "audit": audit, "published": False, "recent": recent, "request": None,
               "sent": True}  # fmt: skip
        self._write(sid, new, mech)
        self.slots.pop(sid, None)
        # 8. Persist.
        await self.persist()
        # 9. Publish (10. Mark happens inside).
        await self._publish(stream, new)
        metrics.RELEASE_LATENCY.labels(sid).observe(max(0.0, time.time() - end))
        metrics.RELEASES.labels(sid, "fresh" if rel.fresh else "approximated").inc()
        metrics.LAST_RELEASE_TIMESTAMP.labels(sid).set(time.time())
        metrics.LAST_RELEASED_SLOT.labels(sid).set(slot)
        metrics.SLOT_SECONDS.labels(sid).set(stream.slot_s)
        for level, x in zip(stream.levels, rel.spent, strict=True):
            metrics.EPSILON_SPENT.labels(sid, level.name).inc(float(x))
        self._report_population(stream, mech)
        log.info("released stream=%s slot=%d fresh=%s status=%s users=%d+%d", sid, slot,
                 rel.fresh, rel.status, rel.users_dc, rel.users_pub)  # fmt: skip

    async def _publish(self, stream: StreamConfig, entry: dict[str, Any]) -> None:
        # 9. Publish: the stored bytes, never a recomputation.
        await self.produce(self.topics.releases, stream.id.encode(), entry["record"])
        await self.produce(self.topics.audit, stream.id.encode(), entry["audit"])
        # 10. Mark.
        entry["published"] = True
        self._write(stream.id, entry)

    def _report_population(self, stream: StreamConfig, mech: Any) -> None:
        """``dpstream_users_available`` / ``_used`` from the population ledger."""
        if not mech.population_division:
            return
        pop = mech.population
        available = pop.available_users(pop.t)
        metrics.USERS_AVAILABLE.labels(stream.id).set(available)
        metrics.USERS_USED.labels(stream.id).set(stream.users - available)
