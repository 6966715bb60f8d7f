"""The local driver: issue collection requests, close rounds, release slots.

:class:`LocalDriver` decides what a ``mode: local`` stream does at each wall-clock slot; the
shared :class:`~app.stream.release.protocol.Publisher` records, persists and publishes it. It
works on the ``slots`` mapping (stream id -> msgpack bytes: the pending round's merged tally),
so it runs on dicts in ``tests/stream`` and on the RocksDB tables in the
worker. Its clock is the wall clock (:attr:`LocalDriver.clock`), never behind the ``now`` of
the ticks and tallies the reports service sends several times per round: those wake the agent,
but after a restart Faust first reads a backlog of old ticks, whose times would send requests
with deadlines already past.

Slots follow the wall clock: slot ``s`` covers ``[s slot_s, (s + 1) slot_s)``. The mechanism
numbers its own slots ``1, 2, ...`` (``t``, the slot devices put in their ledgers); the ledger
keeps ``offset`` with ``s = offset + t``, and every wall slot from the first one on gets exactly
one mechanism slot, so ``t`` never skips. The first slot is the first one that starts after the
agent first hears of the stream. A round the service could not start in time (the worker was
down or behind until less than ``round_s`` of its slot was left, for the slot's first round or
for its second, after a round that ran late across a restart) is still stepped, with an empty
tally and no request sent: devices would refuse its request once the slot is over (their clock
check, :mod:`app.client.clock`), so asking would only lose the round later. The mechanism
repeats its last release (or the cohort it planned stays unused), which only costs utility.

A personalized stream (PLDP-IDS) first gives the mechanism every user's level for the slot, from
the ``preferences`` topic through the book in the ledger entry
(:mod:`app.stream.release.local_levels`);
the request names them, devices check their own.

The ledger entry (:class:`~app.stream.release.entry.LedgerEntry`) of a local stream adds
``offset``; ``request``, the encoded ``collection-requests`` value of the pending round (None
when no round is pending); ``sent``, whether the broker acknowledged it; and ``deadline``.
The ``slots`` entry holds the merged tally of the pending round: support, reports per group,
and the partitions that sent it.
Sizes: the state carries the population ledger (4 bytes per bucket) and the pending cohort; the
request carries a bitmap of ``ceil(buckets / 8)`` bytes (8 KiB for ``2**16`` buckets).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, MutableMapping

import numpy as np

from app.dp.errors import DPError
from app.dp.interfaces import RoundDriven, as_round
from app.dp.local.wire import CollectionRequest, Tally, mask_users
from app.stream.config import StreamConfig
from app.stream.internal import (
    Internal,
    OpenRound,
    PartitionTally,
    decode_open_round,
    encode_open_round,
)
from app.stream.records import encode_request
from app.stream.release.entry import LedgerEntry, LocalRound
from app.stream.release.local_levels import LevelBook, ReadPreferences
from app.stream.release.protocol import Publisher
from app.wire import requests

log = logging.getLogger(__name__)


class LocalDriver:
    """The local slot protocol of ``mode: local`` streams; see :meth:`run_slot`."""

    def __init__(
        self,
        publisher: Publisher,
        slots: MutableMapping[str, bytes],
        clock: Callable[[], float] = time.time,
        preferences: ReadPreferences | None = None,
    ) -> None:
        self.pub = publisher
        self.slots = slots
        self.clock = clock
        """The wall clock (tests replace it)."""
        self.preferences = preferences
        """Reads ``preferences`` for personalized streams (None: every user at the default)."""
        self.start_slot: dict[str, int] = {}
        self.woke: dict[str, float] = {}
        """Per stream, the clock at this process's first message (see :meth:`_round_due`)."""

    # -- entry point ----------------------------------------------------------------------------
    async def on_message(self, stream: StreamConfig, msg: Internal) -> None:
        """Handle one ``partials`` value of a local stream (a tally or a tick)."""
        now = self.clock()
        self.woke.setdefault(stream.id, now)
        entry = self.pub.read(stream.id)
        if entry is not None:
            await self.pub.recover(stream, entry)
            if entry.local.request is not None and not entry.local.sent:
                await self._send_request(stream, entry)
        if isinstance(msg, PartitionTally):
            self._merge(stream, entry, msg)
        await self.run_slot(stream, now)

    # -- state --------------------------------------------------------------------------------
    def _pending(self, entry: LedgerEntry | None) -> CollectionRequest | None:
        if entry is None or entry.local.request is None:
            return None
        return requests.decode(entry.local.request).request

    def _merge(self, stream: StreamConfig, entry: LedgerEntry | None, msg: PartitionTally) -> None:
        pending = self._pending(entry)
        slot, rnd = msg.slot, msg.round
        if pending is None or (pending.slot, pending.round) != (slot, rnd):
            return  # a replayed tally of a closed round, or one that came after its timeout
        m = len(pending.oracle)
        if len(msg.support) != m * stream.d or len(msg.reports) != m:
            log.error("tally with wrong shape stream=%s slot=%d round=%s", stream.id, slot, rnd)
            return
        cur = self._round(stream.id)
        if cur is None or (cur.slot, cur.round) != (slot, rnd):
            cur = OpenRound(slot, rnd, [0] * len(msg.support), [0] * m, msg.partitions)
        if msg.partition in cur.parts:
            return  # the first tally per (round, partition) wins
        self.slots[stream.id] = encode_open_round(cur.merge(msg))

    def _round(self, sid: str) -> OpenRound | None:
        """The round whose tallies are being merged (the ``slots`` table)."""
        return decode_open_round(self.slots.get(sid), sid)

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

        A round that would start less than ``round_s`` before its slot's end runs step 5 with
        an empty tally and sends nothing (see the module docstring).
        """
        sid = stream.id
        while True:
            entry = self.pub.read(sid)
            mech = as_round(self.pub.mechanism(stream, entry))
            slot = self._next_slot(stream, entry, now)
            pending = self._pending(entry)
            if pending is not None:
                assert entry is not None
                if not self._round_due(stream, entry, now):
                    return
                # 5. Collect: the merged tally of the round.
                tally = self._tally(stream, pending)
                request = self._on_tally(mech, tally, stream, slot)
                self.slots.pop(sid, None)
            else:
                start = stream.slots.start(slot)
                if now < start:
                    return
                if entry is None:
                    entry = LedgerEntry(local=LocalRound(offset=slot - (mech.t + 1)))
                # 1. Open.
                if mech.takes_levels():
                    await self._assign_levels(stream, mech, entry, slot)
                request = mech.open_slot(self.pub.rng(stream, slot))
            if request is not None and now >= stream.slots.end(slot) - stream.round_s:
                # Too late for a round: its deadline would pass the slot's end, where devices
                # refuse it by their clock (app.client.clock). Step on without reports.
                log.warning(
                    "slot missed stream=%s slot=%d round=%s: stepped without reports",
                    sid,
                    slot,
                    request.round,
                )
                while request is not None:
                    empty = Tally(
                        request.slot,
                        request.round,
                        np.zeros((len(request.oracle), stream.d), dtype=np.int64),
                        np.zeros(len(request.oracle), dtype=np.int64),
                    )
                    request = self._on_tally(mech, empty, stream, slot)
            if request is not None:
                await self._ask(stream, mech, entry, slot, request, now)
                continue
            # 6. Close.
            await self._release(stream, mech, entry, slot)

    async def _assign_levels(
        self, stream: StreamConfig, mech: RoundDriven, entry: LedgerEntry, slot: int
    ) -> None:
        """Step 1 of a personalized stream: read ``preferences`` on from the book's offsets,
        and give the mechanism every user's level at ``slot``
        (:mod:`app.stream.release.local_levels`).
        The book is recorded with the slot's first write. A failed read only delays changes
        (each takes effect after the slot it is read in), so the slot goes on with the book."""
        names = [level.name for level in stream.levels]
        book = LevelBook.from_dict(stream.users, entry.local.levels, names, stream.id)
        if self.preferences is not None:
            try:
                records = await self.preferences(dict(book.offsets))
            except Exception as exc:  # noqa: BLE001 - the broker is away: levels as they were
                log.warning("preferences not read stream=%s slot=%d: %s", stream.id, slot, exc)
            else:
                floor = stream.slots.start(slot - 1)  # effective from this slot at the earliest
                horizon = stream.slots.horizon(stream.slots.start(slot + 1))
                book.apply(records, floor, initial=mech.t == 0, horizon=horizon)
        mech.assign(book.vector(stream, slot))
        book.settle(stream, slot)  # asked about this slot and later ones only
        entry.local.levels = book.to_dict()

    async def skip(self, stream: StreamConfig, now: float) -> int:
        """Close the stream's open slot after the mechanism refused a step of it (the
        releaser's :meth:`~app.stream.release.Releaser._refused`), from the ledger: the
        in-memory mechanism may be half-stepped. Returns the slot.

        No round recorded for the slot yet: nothing was asked, so the slot is left out
        (``next_slot`` and ``offset`` move on together and the mechanism's next slot is the next
        wall slot; its windows, counted in its own slots, only get longer in wall time). A round
        recorded (devices may have reported, and spent): the slot is stepped with empty tallies
        and released, a repeat, as a slot the service was too late for."""
        sid = stream.id
        entry = self.pub.read(sid)
        slot = self._next_slot(stream, entry, now)
        self.slots.pop(sid, None)
        pending = self._pending(entry)
        if entry is not None and pending is not None:
            mech = as_round(self.pub.mechanism(stream, entry))
            request: CollectionRequest | None = pending
            while request is not None:
                m = len(request.oracle)
                empty = Tally(
                    request.slot,
                    request.round,
                    np.zeros((m, stream.d), dtype=np.int64),
                    np.zeros(m, dtype=np.int64),
                )
                request = mech.on_tally(empty, self.pub.rng(stream, slot, "/tally"))
            await self._release(stream, mech, entry, slot)
            return slot
        if entry is None:
            entry = LedgerEntry(local=LocalRound(offset=slot - 1))  # a fresh mechanism: t = 0
        entry.local.offset = (entry.local.offset or 0) + 1
        entry.next_slot = slot + 1
        self.pub.write(sid, entry)
        await self.pub.persist()
        return slot

    def _next_slot(self, stream: StreamConfig, entry: LedgerEntry | None, now: float) -> int:
        if entry is not None and entry.next_slot is not None:
            return entry.next_slot
        if stream.id not in self.start_slot:
            self.start_slot[stream.id] = stream.slots.slot_of(now) + 1
        return self.start_slot[stream.id]

    def _round_due(self, stream: StreamConfig, entry: LedgerEntry, now: float) -> bool:
        """Whether the pending round closes: every partition's tally came, or it timed out.

        The timeout runs from the deadline, or from this process's first message if that is
        later: a round pending across a restart gets ``release_timeout_s`` for the reports
        service to replay its reports (durable in ``reports``, already spent on the devices)
        instead of closing at once with zeros.
        """
        cur = self._round(stream.id)
        complete = cur is not None and len(cur.parts) >= cur.of
        since = max(entry.local.deadline, self.woke.get(stream.id, 0.0))
        return complete or now >= since + stream.release_timeout_s

    def _tally(self, stream: StreamConfig, pending: CollectionRequest) -> Tally:
        m = len(pending.oracle)
        cur = self._round(stream.id)
        if cur is None or (cur.slot, cur.round) != (pending.slot, pending.round):
            support, reports = [0] * (m * stream.d), [0] * m
        else:
            support, reports = cur.support, cur.reports
            if len(cur.parts) < cur.of:
                log.warning(
                    "round timed out stream=%s slot=%d round=%s partitions=%d/%d",
                    stream.id,
                    pending.slot,
                    pending.round,
                    len(cur.parts),
                    cur.of,
                )
        return Tally(
            pending.slot,
            pending.round,
            np.asarray(support, dtype=np.int64).reshape(m, stream.d),
            np.asarray(reports, dtype=np.int64),
        )

    def _on_tally(
        self, mech: RoundDriven, tally: Tally, stream: StreamConfig, slot: int
    ) -> CollectionRequest | None:
        rng = self.pub.rng(stream, slot, "/tally")
        try:
            out: CollectionRequest | None = mech.on_tally(tally, rng)
        except DPError as exc:  # a tally the mechanism refuses (a bug upstream): count nobody
            log.error("tally refused stream=%s slot=%d: %s", stream.id, slot, exc)
            empty = Tally(
                tally.slot, tally.round, np.zeros_like(tally.support), np.zeros_like(tally.reports)
            )
            out = mech.on_tally(empty, rng)
        return out

    async def _ask(
        self,
        stream: StreamConfig,
        mech: RoundDriven,
        entry: LedgerEntry,
        slot: int,
        request: CollectionRequest,
        now: float,
    ) -> None:
        sid = stream.id
        deadline = max(now, self.clock(), stream.slots.start(slot)) + stream.round_s
        # 2. Record.
        entry.state = mech.state_dict()
        entry.next_slot = slot
        entry.local.request = encode_request(stream, slot, deadline, request)
        entry.local.sent, entry.local.deadline = False, deadline
        self.pub.write(sid, entry, mech)
        # 3. Persist.
        await self.pub.persist()
        # 4. Ask (and mark sent).
        await self._send_request(stream, entry)
        asked = int(mask_users(request, stream.users).sum())
        self.pub.watch.on_round(stream, request.round, asked)
        self._report_population(stream, mech)
        log.info("asked stream=%s slot=%d round=%s users=%d", sid, slot, request.round, asked)

    async def _send_request(self, stream: StreamConfig, entry: LedgerEntry) -> None:
        assert entry.local.request is not None
        await self.pub.produce(
            self.pub.topics.collection_requests, stream.id.encode(), entry.local.request
        )
        entry.local.sent = True
        self.pub.write(stream.id, entry)

    async def _release(
        self, stream: StreamConfig, mech: RoundDriven, entry: LedgerEntry, slot: int
    ) -> None:
        """Steps 7-11: the release of ``slot`` through the shared protocol."""
        rel = mech.close_slot()

        def leave_round() -> None:
            self.slots.pop(stream.id, None)

        users = {"users_dc": rel.users_dc or 0, "users_pub": rel.users_pub or 0}  # set locally
        await self.pub.release(
            stream, mech, entry, slot, [(slot, rel)], leave_round, self.clock(), **users
        )
        self._report_population(stream, mech)

    def _report_population(self, stream: StreamConfig, mech: RoundDriven) -> None:
        """Tell the listeners the population ledger (public: it follows from the collection
        requests)."""
        available = mech.available_users()
        if available is not None:
            use = mech.level_use()
            users = mech.users
            self.pub.watch.on_population(stream, users, available, use)
