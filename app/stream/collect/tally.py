"""The collect stage of local mode: validate reports against their request, tally per round.

:class:`ReportCollector` is pure bookkeeping (no Kafka, no clock of its own), so ``tests/stream``
drives it directly; :mod:`app.stream.collect.reports` feeds it the ``collection-requests`` it reads
and
batches of ``reports``, and ships what :meth:`ReportCollector.flush` returns.

A round is one :class:`~app.dp.local.wire.CollectionRequest` of a stream, known from the
``collection-requests`` topic. Per reports partition and round the collector keeps the support
counts (``groups x d``), the number of reports per group, and the smallest offset that fed
them. A report is counted only if, in this order:

1. its ``(stream, slot, round)`` is a request the service sent (else ``wrong_slot``), and this
   partition has not closed that round yet (else ``late``);
2. its user index is registered, its bucket is in the request's cohort bitmap, and its group is
   the user's group: the level the request holds for the user (personalized mechanisms, whose
   requests name every user's level, :data:`~app.dp.local.wire.SITS_OUT` for one sitting out
   after a change of level), else the index block (else ``not_asked``);
3. the user has not reported in its window: population-division mechanisms (a cohort reports
   with the whole ``eps``, or a personalized one with ``1/s_k`` of it) drop a user of level
   ``k`` that already reported ``s_k`` times in the last ``w_k - 1`` slots, or already in this
   slot (``s_k = 1`` and ``w_k = max(w)`` for every user of a non-personalized mechanism, which
   runs at the strictest level; a personalized one names ``shares`` per level, 1 without OPS);
   budget-division ones (everybody reports a share every slot) drop a second report to the same
   round (``window_used``);
4. the payload is a report of the requested oracle (else ``invalid``, and dead-letter).

Steps 2-3 run vectorized over a batch (numpy over user indices), and accepted payloads become
support counts with the oracle's own ``support``. Reports are keyed by user, so a user's reports
all reach one partition and step 3 holds across partitions. The window check keeps the last
reported slot per registered user (two ``int32`` arrays per stream, 8 bytes per user;
(population division: the last ``max(s_k)`` report slots per registered user instead), in
memory only: it starts empty after a restart, and need not be persisted, because

* across slots, step 2 already enforces the window: a cohort is planned by the population
  ledger, which never marks a bucket twice within ``w`` slots (nor in both rounds of a slot),
  and it is persisted before its request leaves and re-sent byte for byte, never re-planned;
* within a round, every report of a round still open is replayed after a restart (the
  committed offset is at or before the first report of every open round, and is committed only
  after the tallies of the rounds closed are acknowledged), so the record is rebuilt for it;
* a report to a round closed before the crash can only reach a tally the release agent drops:
  it merges the first tally per (round, partition), which precedes it in ``partials``, and
  ignores rounds that are no longer pending.

Offsets: :meth:`ReportCollector.commit_offset` is the smallest offset still feeding an open
round, as in :mod:`app.stream.collect.events`. A round closes in a partition when the wall clock
passes its deadline: the partition's tally is emitted once (zeros if no report came).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.local.wire import ROUNDS, SITS_OUT, CollectionRequest
from app.dp.oracles import FrequencyOracle, make
from app.stream.config import StreamConfig
from app.stream.errors import BadEvent
from app.stream.records import ROUND_INDEX, decode_report
from app.wire import requests

KEEP_ROUNDS = 6
"""Requests remembered per stream (older ones: their reports are ``wrong_slot``)."""
NEVER = np.iinfo(np.int32).min // 2


@dataclass
class Round:
    """One request of a stream and its per-partition tallies."""

    stream: str
    slot: int
    rnd: str
    deadline: float
    request: CollectionRequest
    member: npt.NDArray[np.bool_] | None
    oracles: list[FrequencyOracle]
    levels: npt.NDArray[np.int64] | None
    support: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    reports: dict[int, npt.NDArray[np.int64]] = field(default_factory=dict)
    min_offset: dict[int, int] = field(default_factory=dict)
    closed: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class TallyOut:
    """One partition's tally of one round (support ``groups x d`` row-major, reports per group)."""

    stream: str
    slot: int
    rnd: str
    partition: int
    support: list[int]
    reports: list[int]


@dataclass
class _Rows:
    """Reports of one batch for one round, decoded but not yet validated as a whole."""

    users: list[int] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    payloads: list[list[int]] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    records: list[Any] = field(default_factory=list)


class ReportCollector:
    """Aggregates reports per round and partition; see the module docstring."""

    def __init__(self, streams: Iterable[StreamConfig]) -> None:
        self.streams = {s.id: s for s in streams if s.local}
        self.rounds: dict[tuple[str, int, str], Round] = {}
        self.partitions: dict[int, bool] = {}  # partition -> caught up
        self.outcomes: Counter[tuple[str, str]] = Counter()
        self.late_slots: set[tuple[str, int]] = set()
        """``(stream, slot)`` pairs that dropped a report as late (``dpstream_late_slots``)."""
        self._last: dict[str, npt.NDArray[np.int32]] = {}
        self._group_edges: dict[str, npt.NDArray[np.int64]] = {}
        self._population_division: dict[str, bool] = {}
        self._windows: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = {}
        for sid, s in self.streams.items():
            mech = s.build_local()
            self._population_division[sid] = mech.population_division
            self._group_edges[sid] = np.cumsum(mech.group_users).astype(np.int64)
            self._windows[sid] = mech.report_windows()  # step 3: (w_k, s_k) per group
            rows = int(self._windows[sid][1].max()) if mech.population_division else 2
            self._last[sid] = np.full((rows, s.users), NEVER, dtype=np.int32)

    # -- partitions ---------------------------------------------------------------------------
    def assign(self, partition: int) -> None:
        self.partitions[partition] = False

    def caught_up(self, partition: int) -> bool:
        return self.partitions[partition]

    def mark_caught_up(self, partition: int) -> None:
        self.partitions[partition] = True

    def revoke(self, partition: int) -> None:
        """Forget a partition's open tallies: its next owner replays them from the commit."""
        self.partitions.pop(partition, None)
        for r in self.rounds.values():
            r.support.pop(partition, None)
            r.reports.pop(partition, None)
            r.min_offset.pop(partition, None)
            r.closed.discard(partition)

    # -- requests -----------------------------------------------------------------------------
    def add_request(self, raw: bytes) -> Round | None:
        """Learn one ``collection-requests`` value (None: not a local stream of this config)."""
        msg = requests.decode(raw)
        stream = self.streams.get(msg.stream)
        if stream is None:
            return None
        request = msg.request
        key = (stream.id, request.slot, request.round)
        if key in self.rounds:
            return self.rounds[key]
        member = None
        if request.cohort is not None:
            member = np.zeros(request.buckets, dtype=bool)
            member[request.cohort_buckets()] = True
        oracles = [make(o, request.d, e) for o, e in zip(request.oracle, request.eps, strict=True)]
        levels = None
        if request.levels is not None:  # one entry per registered user; missing ones sit out
            levels = np.full(stream.users, SITS_OUT, dtype=np.int64)
            given = np.frombuffer(request.levels, dtype=np.uint8)[: stream.users]
            levels[: given.shape[0]] = given
        rnd = Round(
            stream.id,
            request.slot,
            request.round,
            msg.deadline,
            request,
            member,
            oracles,
            levels,
        )
        self.rounds[key] = rnd
        mine = sorted(k for k in self.rounds if k[0] == stream.id)
        for old in mine[:-KEEP_ROUNDS]:
            del self.rounds[old]
        return rnd

    def newest(self, sid: str) -> tuple[int, int] | None:
        """``(slot, round index)`` of the newest request known for a stream."""
        mine = [(k[1], ROUND_INDEX[k[2]]) for k in self.rounds if k[0] == sid]
        return max(mine) if mine else None

    # -- reports ------------------------------------------------------------------------------
    def add_batch(
        self, partition: int, records: Iterable[Any], wall_now: float = 0.0
    ) -> list[tuple[BadEvent, Any]]:
        """Count a batch of ``reports`` records of one partition; return the unusable ones
        (``wall_now`` is not used: a report's round, not the clock, decides where it counts).

        ``records`` have ``offset`` and ``value``; what is returned goes to the bad-input
        policy (dead-letter). Outcomes are counted in :attr:`outcomes`.
        """
        bad: list[tuple[BadEvent, Any]] = []
        rows: dict[tuple[str, int, str], _Rows] = {}
        for rec in records:
            try:
                sid, slot, r, user, group, payload = decode_report(rec.value)
            except BadEvent as exc:
                bad.append((exc, rec))
                continue
            if sid not in self.streams:
                bad.append((BadEvent("unknown_stream", sid[:64]), rec))
                continue
            key = (sid, slot, ROUNDS[r])
            rnd = self.rounds.get(key)
            if rnd is None:
                self.outcomes[sid, "wrong_slot"] += 1
                continue
            if partition in rnd.closed:
                self.outcomes[sid, "late"] += 1
                self.late_slots.add((sid, slot))
                continue
            buf = rows.get(key)
            if buf is None:
                buf = rows[key] = _Rows()
            buf.users.append(user)
            buf.groups.append(group)
            buf.payloads.append(payload)
            buf.offsets.append(rec.offset)
            buf.records.append(rec)
        for k in sorted(rows, key=lambda k: (k[0], k[1], ROUND_INDEX[k[2]])):
            bad.extend(self._count(partition, self.rounds[k], rows[k]))
        return bad

    def _count(self, partition: int, rnd: Round, rows: _Rows) -> list[tuple[BadEvent, Any]]:
        """Steps 2-4 of the module docstring over one round's rows, vectorized."""
        stream = self.streams[rnd.stream]
        sid, n_users = rnd.stream, stream.users
        users = np.asarray(rows.users, dtype=np.int64)
        groups = np.asarray(rows.groups, dtype=np.int64)
        # 2. Asked: registered, bucket in the cohort, the user's own group.
        ok = (users >= 0) & (users < n_users)
        safe = np.where(ok, users, 0)
        if rnd.member is not None:
            ok &= rnd.member[safe % rnd.request.buckets]
        if rnd.levels is not None:
            ok &= rnd.levels[safe] == groups
        else:
            ok &= np.searchsorted(self._group_edges[sid], safe, side="right") == groups
        self.outcomes[sid, "not_asked"] += int((~ok).sum())
        # 3. Window: the user's last report slots (any round), and duplicates in the batch.
        last = self._last[sid]
        r = ROUND_INDEX[rnd.rnd]
        division = self._population_division[sid]
        if division:
            w, shares = self._windows[sid]
            level = np.clip(groups, 0, w.shape[0] - 1)
            in_window = (last[:, safe] > rnd.slot - w[level]).sum(axis=0)
            used = (in_window >= shares[level]) | (last[0, safe] == rnd.slot)
        else:
            used = last[r, safe] == rnd.slot
        first = np.zeros(users.shape[0], dtype=bool)
        _, idx = np.unique(users, return_index=True)
        first[idx] = True
        used |= ~first
        self.outcomes[sid, "window_used"] += int((ok & used).sum())
        ok &= ~used
        # 4. Payloads of the requested oracle.
        bad: list[tuple[BadEvent, Any]] = []
        for i in np.flatnonzero(ok):
            oracle = rnd.oracles[int(groups[i])]
            if not oracle.accepts(rows.payloads[i]):
                ok[i] = False
                bad.append(
                    (BadEvent("out_of_domain", f"not a {oracle.name} report"), rows.records[i])
                )
        accepted = np.flatnonzero(ok)
        if division:  # newest first: shift the older report slots down one row
            last[1:, users[accepted]] = last[:-1, users[accepted]]
            last[0, users[accepted]] = rnd.slot
        else:
            last[r, users[accepted]] = rnd.slot
        self.outcomes[sid, "accepted"] += int(accepted.shape[0])
        m, d = len(rnd.oracles), rnd.request.d
        support = rnd.support.setdefault(partition, np.zeros((m, d), dtype=np.int64))
        reports = rnd.reports.setdefault(partition, np.zeros(m, dtype=np.int64))
        for g, oracle in enumerate(rnd.oracles):
            mine = accepted[groups[accepted] == g]
            if mine.shape[0]:
                sent = oracle.from_payloads([tuple(rows.payloads[i]) for i in mine])
                support[g] += oracle.support(sent)
                reports[g] += mine.shape[0]
        if rows.offsets:
            low = min(rows.offsets)
            rnd.min_offset[partition] = min(rnd.min_offset.get(partition, low), low)
        return bad

    # -- closing ------------------------------------------------------------------------------
    def flush(self, wall_now: float) -> list[TallyOut]:
        """Close every round whose deadline passed in every caught-up partition."""
        out: list[TallyOut] = []
        for rnd in self.rounds.values():
            if wall_now < rnd.deadline:
                continue
            m, d = len(rnd.oracles), rnd.request.d
            for p, caught_up in self.partitions.items():
                if not caught_up or p in rnd.closed:
                    continue
                support = rnd.support.pop(p, np.zeros((m, d), dtype=np.int64))
                reports = rnd.reports.pop(p, np.zeros(m, dtype=np.int64))
                rnd.min_offset.pop(p, None)
                rnd.closed.add(p)
                out.append(
                    TallyOut(
                        rnd.stream,
                        rnd.slot,
                        rnd.rnd,
                        p,
                        [int(x) for x in support.reshape(-1)],
                        [int(x) for x in reports],
                    )
                )
        return out

    def commit_offset(self, partition: int, position: int) -> int:
        """The offset to commit for ``partition``: the first one an open round still needs."""
        needed = [
            r.min_offset[partition] for r in self.rounds.values() if partition in r.min_offset
        ]
        return min(needed, default=position)

    def take_outcomes(self) -> Counter[tuple[str, str]]:
        """Report outcomes counted since the last call, by ``(stream, outcome)``."""
        out, self.outcomes = self.outcomes, Counter()
        return out
