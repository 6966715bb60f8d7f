"""The central accountant: recompute, user by user, where each value had to count, and judge.

Pure: it works on a :class:`~app.verify.read.Snapshot` (decoded here with the public wire,
:mod:`app.wire`: the events by the same rules as the worker, the service's records as plain
maps whose fields this module reads for itself, so a record the worker's own types would
misread is still judged) and a stream's configuration, so ``tests/verify`` plants defects on
hand-built topic contents without a broker. The rules come from :mod:`app.verify.rules`,
never from the worker's classes.

Steps (:func:`account_central`):

1. **Releases**: every ``(stream, slot)`` of ``releases`` holds one value, byte-identical
   duplicates allowed (else ``release_differs``); no slot is missing between the first and the
   last released one (``release_missing``); none was published before its slot ended
   (``released_early``, :mod:`app.verify.early`).
2. **Level histories** (:mod:`app.verify.levels`): every ``levels`` record of every user; the
   last one must hold every level change the user asked for on ``preferences`` (a truncated
   one: the tail of them), in order and never backdated (``level_missing``,
   ``level_backdated``).
3. **Values**: an ``events`` record counts if it decodes for the stream, its key is its user and
   it sits in the partition the key hashes to (Kafka's default partitioner). A user's first value
   in a slot counts (for ``max_values: l``, its first ``l`` distinct values; a sum stream counts
   the first amount per value, clipped to ``alpha``), in the group the user's history gives for
   the slot, or nowhere inside a change gap (reason ``level_change``): the history in force when
   the slot's partial was sent (the last ``levels`` record of the user stamped before it).
4. **Partials**: the *first* ``partials`` record per ``(slot, partition)`` is what the release
   agent merged (later ones are replays it ignores; a partial it refuses, for a partition the
   ``events`` topic does not have or a slot far past its own time, is skipped and counted). A
   cell ``(group, value)`` above the expected count is a violation: ``no_gap`` when a user
   inside its change gap could explain it, ``wrong_group`` when a user of another group could,
   ``overcount`` when nobody could. Below the expected count, values did not reach a release, by
   reason: ``unclosed`` (no partial yet), ``unreleased`` (the slot has no release yet),
   ``after_release`` (the partial came after the slot's release: a slot closed on the timeout),
   ``late`` (the event was appended after the partial was sent), ``dropped`` (anything else).
5. **Users**: the slots and groups each user was counted in (where the worker put a value
   against the rules and only the users named could explain it, that slot and group too):
   ``two_groups`` when two groups of a user are closer than ``max(w_a, w_b)`` slots, and the
   spend of every window of the user's own ``w``, summed from the ``audit`` spend of the groups
   it was counted in, must stay within its ``eps`` (``overspend``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from app.dp.units import relation_factor
from app.stream.collect.partitioning import partition_for
from app.stream.config import StreamConfig
from app.stream.internal import Internal, InternalError, Partial, decode
from app.verify.early import check_early
from app.verify.levels import (
    Records,
    check_preferences,
    complete,
    in_force,
    level_records,
    offset_marks,
)
from app.verify.read import Msg, RecordError, Snapshot
from app.verify.rules import Level, groups_of
from app.verify.units import UserSpend
from app.verify.verdict import LevelSpend, Verdict, Violation
from app.verify.windows import Rows, two_groups, worst_windows
from app.wire import events
from app.wire.codec import read_map
from app.wire.errors import BadRecordError

LEVEL_LAG_S = 10.0
"""A preference must be in the levels history once a partial was sent this many seconds (plus
two slots and the grace) after the preference record: the worker reads preferences to their end
several times per slot."""
SUM_TOLERANCE = 1e-6
"""Relative tolerance when comparing a sum stream's float partials with the expected sums."""
SKEW_S = 60.0
"""How far past its own Kafka time a partial's slot may be due (at least two slots): the
release agent refuses anything further (docs/service.md, "No input moves a clock")."""

GAP = -1
"""A value's group inside a change gap: not counted."""
UNKNOWN = -2
"""A value's group when the history the worker held for its slot is no longer in ``levels``
(compacted away, and the oldest record left is truncated): the value is not judged."""

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def levels_of(stream: StreamConfig) -> tuple[Level, ...]:
    """The stream's levels as :mod:`app.verify.rules` sees them."""
    return tuple(Level(lv.name, int(lv.w), float(lv.eps)) for lv in stream.levels)


# -- releases and audit -------------------------------------------------------------------------
@dataclass
class Released:
    """Per slot of one stream: the distinct release values, and when the slot was released."""

    values: dict[int, set[bytes]]
    at: dict[int, float]
    delayed: dict[int, bool]


def check_releases(stream: str, msgs: list[Msg], verdict: Verdict, first_slot: int) -> Released:
    """Step 1 of the module docstring; ``first_slot``: the first slot judged."""
    out = Released({}, {}, {})
    for m, rec in records_of(msgs, "releases", stream):
        try:
            slot = int(rec["slot"])
            at = float(rec.get("released_at", m.timestamp_ms / 1000))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise malformed(m, "releases", exc) from None
        assert m.value is not None  # records_of skips tombstones
        out.values.setdefault(slot, set()).add(m.value)
        out.at[slot] = min(out.at.get(slot, at), at)
        out.delayed[slot] = bool(rec.get("delayed", False))
    judged = sorted(s for s in out.values if s >= first_slot)
    for slot in judged:
        if len(out.values[slot]) > 1:
            n = len(out.values[slot])
            detail = f"slot {slot}: {n} different releases"
            verdict.add(Violation("release_differs", (slot,), detail))
    if judged:
        missing = sorted(set(range(judged[0], judged[-1] + 1)) - set(judged))
        for slot in missing:
            verdict.add(Violation("release_missing", (slot,), f"slot {slot}: no release"))
        verdict.slots = (judged[0], judged[-1], len(judged))
    return out


def audit_spend(stream: str, msgs: list[Msg], names: tuple[str, ...]) -> dict[int, FloatArray]:
    """Per slot, the spend per group of the first ``audit`` record of the slot."""
    out: dict[int, FloatArray] = {}
    for m, rec in records_of(msgs, "audit", stream):
        try:
            slot = int(rec["slot"])
            spent = rec.get("spent_by_group") or {}
            row = np.asarray([float(spent.get(n, 0.0)) for n in names])
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise malformed(m, "audit", exc) from None
        out.setdefault(slot, row)
    return out


def records_of(msgs: list[Msg], topic: str, stream: str) -> Iterator[tuple[Msg, dict[str, Any]]]:
    """Each record of ``stream`` on ``topic`` (tombstones skipped), decoded by :func:`record`."""
    for m in msgs:
        if m.value is None:
            continue
        rec = record(m, topic)
        if rec.get("stream") == stream:
            yield m, rec


def record(m: Msg, topic: str) -> dict[str, Any]:
    """The msgpack map of a record the release agent wrote; :class:`RecordError` if it is not
    one (nothing but the release agent writes these topics: garbage there is not judged)."""
    try:
        return read_map(m.value, topic)
    except BadRecordError as exc:
        raise malformed(m, topic, exc) from None


def malformed(m: Msg, topic: str, why: object) -> RecordError:
    return RecordError(
        f"{topic} partition {m.partition} offset {m.offset}: malformed record ({why}); "
        "verify does not judge around it"
    )


# -- values -------------------------------------------------------------------------------------
@dataclass
class Values:
    """The values that had to count (step 3), one row each, in events order."""

    users: list[str]
    user: IntArray
    slot: IntArray
    partition: IntArray
    value: IntArray
    weight: FloatArray
    appended: FloatArray
    """Kafka timestamp of the event, seconds."""
    group: IntArray
    """:data:`GAP`: inside a change gap; :data:`UNKNOWN`: not known (see :func:`values`)."""


def values(
    stream: StreamConfig, snap: Snapshot, records: Records, partials: dict[tuple[int, int], Any]
) -> Values:
    """Step 3 of the module docstring (``partials``: the first partial per ``(slot,
    partition)``, whose Kafka time picks the level record in force for the slot)."""
    domains = {stream.id: events.Domain.of(stream)}
    seen: dict[str, tuple[bytes, int, int]] = {}  # per user: key, partition (hashed once), index
    cols: list[tuple[int, float, int, float, int, float]] = []
    batch = events.decode_batch([m.value for m in snap.events], domains)
    stamps, amounts, alpha = batch.ts.tolist(), batch.amounts.tolist(), float(stream.alpha or 0)
    for i, m in enumerate(snap.events):
        if batch.codes[i]:
            continue
        name, ts, idx = batch.users[i], stamps[i], batch.values[i]
        known = seen.get(name)
        if known is None:
            key = name.encode()
            known = seen[name] = (key, partition_for(key, snap.input_partitions), len(seen))
        if m.key != known[0] or m.partition != known[1]:
            continue
        weight = min(amounts[i], alpha) if stream.alpha is not None else 1.0  # clipped
        cols.append((known[2], ts, idx, weight, m.partition, m.timestamp_ms / 1000))
    arr = np.asarray(cols, dtype=np.float64).reshape(-1, 6)
    user = arr[:, 0].astype(np.int64)
    slot = np.floor(arr[:, 1] / stream.slot_s).astype(np.int64)  # rules.slot_of, vectorized
    value = arr[:, 2].astype(np.int64)
    keep = _first_values(user, slot, value, stream.max_values)
    users = list(seen)
    out = Values(
        users,
        user[keep],
        slot[keep],
        arr[keep, 4].astype(np.int64),
        value[keep],
        arr[keep, 3],
        arr[keep, 5],
        np.zeros(keep.shape[0], dtype=np.int64),
    )
    out.group[:] = stream.default_level
    levels = levels_of(stream)
    special = np.asarray([u in records for u in users], dtype=bool)
    whole = complete(snap.levels)
    if special.any() and out.user.shape[0]:
        rows = np.flatnonzero(special[out.user])
        order = rows[np.argsort(out.user[rows], kind="stable")]
        bounds = np.flatnonzero(np.diff(out.user[order])) + 1
        for seg in np.split(order, bounds):
            recs = records[users[int(out.user[seg[0]])]]
            closed = np.asarray(
                [
                    partials.get((int(s), int(p)), (None, np.inf))[1]
                    for s, p in zip(out.slot[seg], out.partition[seg], strict=True)
                ],
                dtype=np.float64,
            )
            which = in_force(recs, closed)
            if not whole:  # older records may be gone: the oldest left, if it holds everything
                which[which < 0] = 0 if not recs[0][1].truncated else UNKNOWN
            out.group[seg[which == UNKNOWN]] = UNKNOWN
            for r in np.unique(which[which != UNKNOWN]):
                rows_r = seg[which == r]
                held = None if r < 0 else recs[int(r)][1]
                out.group[rows_r] = groups_of(
                    held, out.slot[rows_r], levels, stream.default_level, stream.slot_s
                )
    return out


def _first_values(user: IntArray, slot: IntArray, value: IntArray, l_max: int) -> IntArray:
    """Indices (in events order) of each user's first value per slot, or first ``l_max``
    distinct values."""
    if user.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    first, _ = distinct(user, slot, *([value] if l_max > 1 else []))
    first = np.sort(first)
    if l_max == 1:
        return first
    order = first[np.lexsort((first, slot[first], user[first]))]
    pair = np.stack([user[order], slot[order]], axis=1)
    new = np.concatenate(([True], np.any(pair[1:] != pair[:-1], axis=1)))
    starts = np.flatnonzero(new)
    rank = np.arange(order.shape[0]) - np.repeat(starts, np.diff(np.append(starts, order.shape[0])))
    return np.sort(order[rank < l_max])


def distinct(*cols: IntArray) -> tuple[IntArray, IntArray]:
    """Rows given as columns: the index of the first row (in row order) of each distinct row,
    the distinct rows in lexicographic order (first column first), and each row's number among
    them (``np.unique(..., axis=0)``'s index and inverse, without its per-row byte views)."""
    n = cols[0].shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(tuple(reversed(cols)))  # stable: equal rows keep their order
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for c in cols:
        sorted_c = c[order]
        new[1:] |= sorted_c[1:] != sorted_c[:-1]
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new], inverse


# -- partials -----------------------------------------------------------------------------------
Record = TypeVar("Record", bound=Internal)


def internal_records(
    stream_id: str, msgs: Iterable[Msg], kind: type[Record], refused: Counter[str]
) -> Iterator[tuple[Record, Msg]]:
    """The stream's records of ``kind`` on the internal topic, each with its message; a value
    that is no internal message is counted ``refused_malformed`` (as the release agent refuses
    it), another kind or another stream's is passed over."""
    for msg in msgs:
        if msg.value is None:
            continue
        try:
            rec = decode(msg.value)
        except InternalError:
            refused["refused_malformed"] += 1
            continue
        if isinstance(rec, kind) and rec.stream == stream_id:
            yield rec, msg


def first_partials(
    stream: StreamConfig, msgs: list[Msg], partitions: int, refused: Counter[str] | None = None
) -> tuple[dict[tuple[int, int], tuple[FloatArray, float]], dict[int, float]]:
    """The first partial per ``(slot, partition)`` (counts ``groups x d``, Kafka time in s), and
    per partition the Kafka time of its last partial.

    Partials the release agent refuses are skipped (and counted in ``refused``): one naming
    another partition count than the ``events`` topic has, or a partition outside it, or a
    slot due past its Kafka time plus the allowed skew (``max(60 s, 2 slots)``).
    """
    m, d = len(stream.levels), stream.d
    skew = max(SKEW_S, 2 * stream.slot_s)
    refused = Counter() if refused is None else refused
    first: dict[tuple[int, int], tuple[FloatArray, float]] = {}
    last: dict[int, float] = {}
    for rec, msg in internal_records(stream.id, msgs, Partial, refused):
        counts = np.asarray(rec.counts, dtype=np.float64)
        if counts.shape[0] != m * d:
            refused["refused_shape"] += 1
            continue
        if not np.isfinite(counts).all() or (counts < 0).any():
            refused["refused_range"] += 1
            continue
        key = (rec.slot, rec.partition)
        at = msg.timestamp_ms / 1000
        if rec.partitions != partitions or not 0 <= key[1] < partitions:
            refused["refused_partition"] += 1
            continue
        if (key[0] + 1) * stream.slot_s + stream.grace_s > at + skew:
            refused["refused_future"] += 1
            continue
        last[key[1]] = max(last.get(key[1], -np.inf), at)
        first.setdefault(key, (counts.reshape(m, d), at))
    return first, last


# -- the accountant -----------------------------------------------------------------------------
def account_central(stream: StreamConfig, snap: Snapshot) -> Verdict:
    """Judge a central stream on a snapshot of its topics (the module docstring's steps)."""
    verdict = Verdict(stream.id, "central", since=snap.since)
    levels = levels_of(stream)
    names = tuple(lv.name for lv in levels)
    first_slot = _first_judged(stream, snap.since)
    released = check_releases(stream.id, snap.releases, verdict, first_slot)
    check_early(stream.slot_s, released.at, first_slot, verdict)
    spend = audit_spend(stream.id, snap.audit, names)
    records = level_records(snap.levels, snap.input_partitions)
    partials, partial_ts = first_partials(
        stream, snap.partials, snap.input_partitions, verdict.refused
    )
    lag = LEVEL_LAG_S + 2 * stream.slot_s + stream.grace_s
    last = {user: recs[-1][1] for user, recs in records.items()}
    check_preferences(
        snap.preferences,
        last,
        names,
        offset_marks(snap.levels),
        partial_ts,
        snap.input_partitions,
        lag,
        verdict,
    )
    vals = values(stream, snap, records, partials)
    judged = vals.slot >= first_slot
    gap = judged & (vals.group == GAP)
    if gap.any():
        verdict.not_released["level_change"] += int(gap.sum())
    verdict.unjudged = int((judged & (vals.group == UNKNOWN)).sum())
    counted = np.flatnonzero(judged & (vals.group >= 0))
    extra = _compare(stream, vals, np.flatnonzero(judged), partials, released, first_slot, verdict)
    _users(stream, levels, vals, counted, extra, spend, verdict)
    return verdict


def _first_judged(stream: StreamConfig, since: float | None) -> int:
    if since is None:
        return -(1 << 62)
    return int(np.ceil(since / stream.slot_s))


def _compare(
    stream: StreamConfig,
    vals: Values,
    judged: IntArray,
    partials: dict[tuple[int, int], tuple[FloatArray, float]],
    released: Released,
    first_slot: int,
    verdict: Verdict,
) -> list[tuple[int, int, int]]:
    """Step 4: compare the expected cells with the first partials; return the ``(user, slot,
    group)`` rows the worker's extra counts can only be explained by."""
    m, d = len(stream.levels), stream.d
    slots, parts = vals.slot[judged], vals.partition[judged]
    first, inverse = distinct(slots, parts)
    keys = np.stack([slots[first], parts[first]], axis=1).reshape(-1, 2)
    expected = np.zeros((keys.shape[0], m, d))
    late = np.zeros((keys.shape[0], m, d))
    g, v, w = vals.group[judged], vals.value[judged], vals.weight[judged]
    ok = g >= 0
    np.add.at(expected, (inverse[ok], g[ok], v[ok]), w[ok])
    at = {(int(k[0]), int(k[1])): i for i, k in enumerate(keys)}
    sent_at = np.asarray([partials.get(k, (None, np.inf))[1] for k in at], dtype=np.float64)
    is_late = ok & (vals.appended[judged] > sent_at[inverse]) if keys.shape[0] else ok
    np.add.at(late, (inverse[is_late], g[is_late], v[is_late]), w[is_late])
    members = judged[np.argsort(inverse, kind="stable")]
    bounds = np.searchsorted(np.sort(inverse), np.arange(keys.shape[0] + 1))
    extra: list[tuple[int, int, int]] = []
    for key in sorted(set(at) | {k for k in partials if k[0] >= first_slot}):
        slot = key[0]
        i = at.get(key)
        exp = expected[i] if i is not None else np.zeros((m, d))
        got = partials.get(key)
        if got is None:
            verdict.not_released["unclosed"] += int(round(exp.sum()))
            continue
        counts, sent = got
        reached = np.minimum(counts, exp)
        short = float((exp - reached).sum())
        if slot not in released.values:
            verdict.not_released["unreleased"] += int(round(exp.sum()))
        elif sent > released.at[slot] and not released.delayed.get(slot, False):
            verdict.not_released["after_release"] += int(round(exp.sum()))
        else:
            verdict.released += float(reached.sum())
            lost_late = float(np.minimum(exp - reached, late[i]).sum()) if i is not None else 0.0
            verdict.not_released["late"] += int(round(lost_late))
            verdict.not_released["dropped"] += int(round(short - lost_late))
        tol = SUM_TOLERANCE * np.maximum(1.0, exp) if stream.alpha is not None else 0.5
        rows = members[bounds[i] : bounds[i + 1]] if i is not None else judged[:0]
        for gi, vi in zip(*np.nonzero(counts - exp > tol), strict=True):
            excess = float(counts[gi, vi] - exp[gi, vi])
            extra += _explain(stream, vals, rows, key, int(gi), int(vi), excess, verdict)
    verdict.not_released = +verdict.not_released
    return extra


def _explain(
    stream: StreamConfig,
    vals: Values,
    rows: IntArray,
    key: tuple[int, int],
    g: int,
    v: int,
    excess: float,
    verdict: Verdict,
) -> list[tuple[int, int, int]]:
    """A cell counted ``excess`` beyond the rules: the users of its slot and partition (``rows``)
    with that value and another group (or a change gap) could explain it. When there are at
    most ``excess`` of them, each one was counted there."""
    slot, part = key
    cand = rows[(vals.value[rows] == v) & (vals.group[rows] != g)]
    if (vals.group[cand] == UNKNOWN).sum() >= excess - 0.5:
        return []  # values whose group is not known could be these: nothing to say
    users = tuple(vals.users[int(u)] for u in vals.user[cand])
    in_gap = bool((vals.group[cand] == GAP).any())
    kind = "no_gap" if in_gap else ("wrong_group" if cand.shape[0] else "overcount")
    verdict.add(
        Violation(
            kind,
            (slot,),
            f"slot {slot} partition {part}: {excess:g} more value(s) "
            f"{stream.labels[v]!r} counted in level {stream.levels[g].name!r} "
            "than the rules allow",
            users,
        )
    )
    if 0 < cand.shape[0] <= excess + 0.5:
        return [(int(vals.user[c]), slot, g) for c in cand]
    return []


def _users(
    stream: StreamConfig,
    levels: tuple[Level, ...],
    vals: Values,
    counted: IntArray,
    extra: list[tuple[int, int, int]],
    spend: dict[int, FloatArray],
    verdict: Verdict,
) -> None:
    """Step 5: per user, two groups within one window, and window spend against eps."""
    ex = np.asarray(extra, dtype=np.int64).reshape(-1, 3)
    user = np.concatenate([vals.user[counted], ex[:, 0]])
    slot = np.concatenate([vals.slot[counted], ex[:, 1]])
    group = np.concatenate([vals.group[counted], ex[:, 2]])
    first, _ = distinct(user, slot, group)
    user, slot, group = user[first], slot[first], group[first]
    cost = np.zeros(slot.shape[0])
    if spend and slot.shape[0]:  # the audit's spend of each row's slot and group (0: none)
        audited = np.asarray(sorted(spend), dtype=np.int64)
        table = np.stack([spend[int(s)] for s in audited])
        at = np.clip(np.searchsorted(audited, slot), 0, audited.shape[0] - 1)
        cost = np.where(audited[at] == slot, table[at, group], 0.0)
    rows = Rows.of(user, slot, group, cost.astype(np.float64))
    for u, sa, ga, sb, gb in two_groups(rows, levels):
        verdict.add(
            Violation(
                "two_groups",
                (sa, sb),
                f"counted in {levels[ga].name!r} at slot {sa} and in "
                f"{levels[gb].name!r} at slot {sb}",
                (vals.users[u],),
            )
        )
    factor = relation_factor(stream.neighbours)
    verdict.spend_rows = UserSpend(
        tuple(vals.users),
        user,
        slot.astype(np.float64) * stream.slot_s,
        (slot + 1).astype(np.float64) * stream.slot_s,
        cost.astype(np.float64).reshape(-1) * factor,
    )
    worst, bad = worst_windows(rows, levels)
    for lv, (n, frac) in zip(levels, worst, strict=True):
        verdict.levels.append(LevelSpend(lv.name, lv.w, lv.eps, n, frac))
    for o in bad:
        lv = levels[o.level]
        verdict.add(
            Violation(
                "overspend",
                (o.start,),
                f"level {lv.name!r}: {o.spent:.6g} spent in the {lv.w} slots "
                f"from slot {o.start}, eps {lv.eps:g}",
                (vals.users[o.user],),
            )
        )
