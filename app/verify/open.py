"""The open-domain accountant: ``verify`` for a ``domain: open`` stream (docs/open-domain.md).

An open stream counts keys nobody listed. Its collect stage keeps per user and slot at most
``max_keys`` distinct keys (by a secret keyed order), each once, and sends per ``(slot,
partition)`` a key -> count partial; every slot spends an ``(eps, delta)`` per level, which the
``audit`` record states. Judged here, from the topics alone (:class:`~app.verify.read.Snapshot`):

1. **Releases**: one value per slot (``release_differs``), none missing between the first and
   the last (``release_missing``), none before its slot ended (``released_early``), as for a
   labels stream (:func:`~app.verify.account.check_releases`).
2. **Values**: a value is a distinct ``(user, slot, key)`` of ``events``: an event that decodes
   for the stream, keyed by its user, in the partition the key hashes to (the slot rule of
   :mod:`app.verify.rules`).
3. **Partials**: the first partial per ``(slot, partition)``. A key counted more often than
   users sent it is an ``overcount``; a map that no choice of at most ``max_keys`` keys per user
   explains is ``key_bound`` (:mod:`app.verify.bound`, exact without the secret order). Values
   not counted, by reason: ``max_keys`` (a user's distinct keys beyond the bound: exactly
   ``keys - max_keys`` per user and slot), then as for labels: ``unclosed``, ``unreleased``,
   ``after_release``, ``late``, ``dropped``.
4. **Users**: every user with a value in a slot is in that slot's release; per level, every
   window of the level's ``w`` slots holding one of the user's slots must spend at most the
   level's ``eps`` (``overspend``) and its ``delta`` (``delta_overspend``), summed from the
   ``audit`` record of each slot the user contributed to. An open mechanism protects every user
   under every level at once (it draws at the strictest level and records each level's share),
   so each user is judged under each level. The privacy unit across streams takes the default
   level's eps and delta of each slot (what :mod:`app.stream.config.units` counts for the
   stream).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.units import relation_factor
from app.stream.collect.partitioning import partition_for
from app.stream.config import StreamConfig
from app.stream.internal import OpenPartial
from app.verify.account import (
    Released,
    _first_judged,
    check_releases,
    distinct,
    internal_records,
    malformed,
    records_of,
)
from app.verify.bound import feasible
from app.verify.early import check_early
from app.verify.read import Msg, Snapshot
from app.verify.rules import Level
from app.verify.units import UserSpend
from app.verify.verdict import LevelSpend, Verdict, Violation
from app.verify.windows import Rows, worst_windows
from app.wire import events
from app.wire.events import Domain

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
KeyCounts = dict[str, int]


@dataclass
class OpenValues:
    """Step 2: the distinct ``(user, slot, key)`` values, one row each, in events order."""

    users: list[str]
    keys: list[str]
    user: IntArray
    slot: IntArray
    partition: IntArray
    key: IntArray
    appended: FloatArray
    """Kafka time of the value's first event, seconds."""


@dataclass(frozen=True)
class Spend:
    """A slot's spending per level, as its ``audit`` record states it."""

    eps: FloatArray
    delta: FloatArray


def account_open(stream: StreamConfig, snap: Snapshot) -> Verdict:
    """Judge an open stream on a snapshot of its topics (the module's steps)."""
    verdict = Verdict(stream.id, "central", since=snap.since)
    first_slot = _first_judged(stream, snap.since)
    released = check_releases(stream.id, snap.releases, verdict, first_slot)
    check_early(stream.slot_s, released.at, first_slot, verdict)
    vals = open_values(stream, snap)
    partials = open_partials(stream, snap.partials, snap.input_partitions, verdict.refused)
    judged = np.flatnonzero(vals.slot >= first_slot)
    _partials(stream, vals, judged, partials, released, first_slot, verdict)
    _users(stream, vals, judged, audit_open(stream, snap.audit), verdict)
    return verdict


# -- partials -----------------------------------------------------------------------------------
def _partials(
    stream: StreamConfig,
    vals: OpenValues,
    judged: IntArray,
    partials: dict[tuple[int, int], tuple[KeyCounts, float]],
    released: Released,
    first_slot: int,
    verdict: Verdict,
) -> None:
    """Step 3: each ``(slot, partition)``'s first partial against its values."""
    slots, parts = vals.slot[judged], vals.partition[judged]
    first, inverse = distinct(slots, parts)
    groups = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[groups], np.arange(first.shape[0] + 1))
    at = {(int(slots[f]), int(parts[f])): i for i, f in enumerate(first)}
    max_keys = stream.max_keys
    for key in sorted(set(at) | {k for k in partials if k[0] >= first_slot}):
        slot = key[0]
        i = at.get(key)
        rows = judged[groups[bounds[i] : bounds[i + 1]]] if i is not None else judged[:0]
        sent: dict[str, set[str]] = {}
        for u, k in zip(vals.user[rows].tolist(), vals.key[rows].tolist(), strict=True):
            sent.setdefault(vals.users[u], set()).add(vals.keys[k])
        per_user = np.asarray([len(keys) for keys in sent.values()], dtype=np.int64)
        over_bound = int(np.maximum(per_user - max_keys, 0).sum())
        if over_bound:
            verdict.not_released["max_keys"] += over_bound
        expected = int(per_user.sum()) - over_bound
        got = partials.get(key)
        if got is None:
            verdict.not_released["unclosed"] += expected
            continue
        counts, sent_at = got
        need = feasible(counts, sent, max_keys)
        for k, excess in sorted(need.overcount.items()):
            who = tuple(sorted(u for u, keys in sent.items() if k in keys))
            verdict.add(
                Violation(
                    "overcount",
                    (slot,),
                    f"slot {slot} partition {key[1]}: key {k[:40]!r} counted {excess} more "
                    "time(s) than users sent it",
                    who,
                )
            )
        if need.beyond:
            verdict.add(
                Violation(
                    "key_bound",
                    (slot,),
                    f"slot {slot} partition {key[1]}: {need.beyond} count(s) beyond "
                    f"max_keys={max_keys} distinct keys per user",
                    need.heavy,
                )
            )
        total = sum(int(c) for c in counts.values())
        reached = min(total, expected)
        if slot not in released.values:
            verdict.not_released["unreleased"] += expected
        elif sent_at > released.at[slot]:
            verdict.not_released["after_release"] += expected
        else:
            verdict.released += reached
            late = int((vals.appended[rows] > sent_at).sum())
            lost = expected - reached
            verdict.not_released["late"] += min(lost, late)
            verdict.not_released["dropped"] += lost - min(lost, late)
    verdict.not_released = +verdict.not_released


# -- users --------------------------------------------------------------------------------------
def _users(
    stream: StreamConfig,
    vals: OpenValues,
    judged: IntArray,
    spend: dict[int, Spend],
    verdict: Verdict,
) -> None:
    """Step 4: per user and level, every window's eps and delta."""
    first, _ = distinct(vals.user[judged], vals.slot[judged])
    rows = judged[first]
    user, slot = vals.user[rows], vals.slot[rows]
    m = len(stream.levels)
    eps = np.zeros((slot.shape[0], m))
    delta = np.zeros((slot.shape[0], m))
    for i, s in enumerate(slot.tolist()):
        found = spend.get(s)
        if found is not None:
            eps[i], delta[i] = found.eps, found.delta
    level0 = np.zeros(slot.shape[0], dtype=np.int64)
    for li, lv in enumerate(stream.levels):
        worst: list[float] = []
        for what, column, bound_ in (("eps", eps, lv.eps), ("delta", delta, lv.delta)):
            one = (Level(lv.name, int(lv.w), float(bound_)),)
            summary, bad = worst_windows(Rows.of(user, slot, level0, column[:, li]), one)
            worst.append(summary[0][1])
            for o in bad:
                kind = "overspend" if what == "eps" else "delta_overspend"
                verdict.add(
                    Violation(
                        kind,
                        (o.start,),
                        f"level {lv.name!r}: {what} {o.spent:.6g} spent in the {lv.w} slots "
                        f"from slot {o.start}, {what} {bound_:g}",
                        (vals.users[o.user],),
                    )
                )
        users = len(np.unique(user))
        verdict.levels.append(
            LevelSpend(lv.name, lv.w, lv.eps, users, worst[0], lv.delta, worst[1])
        )
    factor = relation_factor(stream.neighbours)
    verdict.spend_rows = UserSpend(  # for the privacy unit: the default level's eps and delta
        tuple(vals.users),
        user,
        slot.astype(np.float64) * stream.slot_s,
        (slot + 1).astype(np.float64) * stream.slot_s,
        eps[:, stream.default_level] * factor,
        delta[:, stream.default_level] * factor,
    )


# -- decoding -----------------------------------------------------------------------------------
def audit_open(stream: StreamConfig, msgs: Sequence[Msg]) -> dict[int, Spend]:
    """Per slot, the eps and the delta per level of the slot's first ``audit`` record (the
    exact ``p/q`` fields when written, else the floats beside them)."""
    names = [lv.name for lv in stream.levels]
    out: dict[int, Spend] = {}
    for m, rec in records_of(list(msgs), "audit", stream.id):
        try:
            slot = int(rec["slot"])
            eps = _column(rec, "spent", names)
            delta = _column(rec, "delta_spent", names)
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise malformed(m, "audit", exc) from None
        out.setdefault(slot, Spend(eps, delta))
    return out


def _column(rec: dict[str, Any], name: str, levels: list[str]) -> FloatArray:
    """``{name}_exact_by_group`` (``"p/q"`` per level) as floats, else ``{name}_by_group``."""
    exact = rec.get(f"{name}_exact_by_group")
    if isinstance(exact, dict) and exact:
        return np.asarray([float(Fraction(str(exact.get(n, "0")))) for n in levels])
    spent = rec.get(f"{name}_by_group") or {}
    return np.asarray([float(spent.get(n, 0.0)) for n in levels])


def open_values(stream: StreamConfig, snap: Snapshot) -> OpenValues:
    """Step 2: the distinct ``(user, slot, key)`` values of ``events``, decoded by the event
    rules (:mod:`app.wire.events`), each keyed by its user in the partition the key hashes to."""
    batch = events.decode_batch([m.value for m in snap.events], {stream.id: Domain.of(stream)})
    keys = batch.keys or [""] * len(snap.events)
    seen: dict[str, tuple[bytes, int, int]] = {}
    key_ids: dict[str, int] = {}
    cols: list[tuple[int, float, int, int, float]] = []
    for i, m in enumerate(snap.events):
        if batch.codes[i] or batch.streams[i] != stream.id:
            continue
        name = batch.users[i]
        known = seen.get(name)
        if known is None:
            raw = name.encode()
            known = seen[name] = (raw, partition_for(raw, snap.input_partitions), len(seen))
        if m.key != known[0] or m.partition != known[1]:
            continue
        k = key_ids.setdefault(keys[i], len(key_ids))
        cols.append((known[2], float(batch.ts[i]), m.partition, k, m.timestamp_ms / 1000))
    arr = np.asarray(cols, dtype=np.float64).reshape(-1, 5)
    user, key = arr[:, 0].astype(np.int64), arr[:, 3].astype(np.int64)
    slot = np.floor(arr[:, 1] / stream.slot_s).astype(np.int64)  # rules.slot_of, vectorized
    keep = np.sort(distinct(user, slot, key)[0])
    return OpenValues(
        list(seen),
        list(key_ids),
        user[keep],
        slot[keep],
        arr[keep, 2].astype(np.int64),
        key[keep],
        arr[keep, 4],
    )


def open_partials(
    stream: StreamConfig, msgs: Sequence[Msg], partitions: int, refused: Counter[str]
) -> dict[tuple[int, int], tuple[KeyCounts, float]]:
    """The first whole partial per ``(slot, partition)``: its key counts (summed over groups)
    and the Kafka time of its last chunk. The release agent keeps the first copy of each chunk;
    one refused for its partitions is skipped and counted in ``refused``."""
    chunks: dict[tuple[int, int], dict[int, OpenPartial]] = {}
    sent: dict[tuple[int, int], float] = {}
    for rec, msg in internal_records(stream.id, msgs, OpenPartial, refused):
        key = (rec.slot, rec.partition)
        if rec.partitions != partitions or not 0 <= key[1] < partitions:
            refused["refused_partition"] += 1
            continue
        have = chunks.setdefault(key, {})
        if rec.chunk not in have and len(have) < rec.chunks:
            have[rec.chunk] = rec
            sent[key] = max(sent.get(key, 0.0), msg.timestamp_ms / 1000)
    out: dict[tuple[int, int], tuple[KeyCounts, float]] = {}
    for key, have in chunks.items():
        if len(have) < next(iter(have.values())).chunks:
            continue  # not whole: the agent has not merged it
        counts: KeyCounts = {}
        for part in have.values():
            n = len(part.keys)
            if not n:
                continue
            rows = np.asarray(part.counts, dtype=np.int64).reshape(-1, n).sum(axis=0)
            for k, c in zip(part.keys, rows.tolist(), strict=True):
                counts[k] = counts.get(k, 0) + int(c)
        out[key] = (counts, sent[key])
    return out
