"""Users' level histories as the worker recorded them, checked against ``preferences``.

The worker keeps a short history per user (its last changes; older ones dropped, the record
then ``truncated``) and saves it to the compacted ``levels`` topic before any slot closes on it.
A slot is counted with the history the worker held when it closed the slot, which for an old
slot of a user with many changes is an *earlier* record, not the last one. So:

- :func:`level_records`: every history record of every user, in offset order (offset markers
  and tombstones skipped, as the worker's restore skips them; a malformed record is a
  :class:`~app.verify.read.RecordError`: verify refuses to judge rather than guess);
- :func:`in_force`: per value, which of its user's records was in force when its slot's partial
  was sent (the last one stamped at or before it: the worker saves a history before it closes a
  slot on it, and restores the last record when it takes a partition over); none, when the
  topic is :func:`complete`, means the user had no history yet;
- :func:`check_preferences`: the last record of each user holds every level change the user
  asked for on ``preferences`` (a truncated one: the tail of them).

A request is judged as the worker reads it: a record in a partition its key does not hash to is
dead-lettered by the worker and changes nothing, so is one stamped past the horizon when the
worker read it (the offset markers say by when it had), and a level name that no level of the
stream has may be stored as the default level (``None``: the worker codes a bounded number of
names). A ``levels`` record the worker refuses (malformed, a user's outside its key's
partition, a marker of another partition or an unknown one) is a
:class:`~app.verify.read.RecordError` here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from app.stream.collect.partitioning import partition_for
from app.stream.records import unpack
from app.verify.read import Msg, RecordError
from app.verify.rules import History
from app.verify.verdict import Verdict, Violation
from app.wire import preferences

OFFSET_PREFIX = b"\x00"
"""``levels`` keys starting with this byte are offset markers, not users."""
OFFSET_KEY = b"\x00offset:"
"""Key prefix of an offset marker, followed by the ``preferences`` partition."""
SKEW_S = 60.0
"""The least any stream's horizon lies ahead of the wall clock (``MAX_SKEW_S``, or two slots
when longer): a preference stamped further ahead than this of when the worker read it may
have been refused (``bad_time``), so it is not owed."""

Change = tuple[float, str | None]
Records = dict[str, list[tuple[float, History]]]
"""Per user, its history records ``(Kafka time in s, history)`` in offset order."""


def level_records(msgs: Iterable[Msg], partitions: int) -> Records:
    """Every user's history records (see the module docstring); ``partitions``: the
    ``events`` topic's, which a user's records share."""
    out: Records = defaultdict(list)
    for m in msgs:
        if m.key is not None and m.key.startswith(OFFSET_PREFIX):
            if not m.key.startswith(OFFSET_KEY):
                raise _malformed(m, "an unknown marker")
            continue
        if m.key is None or m.value is None:
            continue
        try:
            user = m.key.decode("utf-8")
            history = _history(unpack(m.value))
            if partition_for(m.key, partitions) != m.partition:
                raise ValueError("a user's record outside its key's partition")
        except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
            raise _malformed(m, exc) from None
        out[user].append((m.timestamp_ms / 1000, history))
    return dict(out)


def offset_marks(msgs: Iterable[Msg]) -> dict[int, list[tuple[int, float]]]:
    """Per ``preferences`` partition, the offset markers in offset order: ``(the next offset
    to apply, Kafka time of the marker in s)``; the worker had read every record below the
    offset when it saved the marker."""
    out: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for m in msgs:
        if m.key is None or not m.key.startswith(OFFSET_KEY) or m.value is None:
            continue
        try:
            digits = m.key[len(OFFSET_KEY) :]
            if not digits.isdigit() or int(digits) != m.partition:
                raise ValueError("an offset marker of another partition")
            offset = unpack(m.value)["offset"]
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError("the offset is not a non-negative integer")
        except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
            raise _malformed(m, exc) from None
        out[m.partition].append((offset, m.timestamp_ms / 1000))
    return dict(out)


def _malformed(m: Msg, exc: object) -> RecordError:
    return RecordError(
        f"levels partition {m.partition} offset {m.offset}: malformed record ({exc}); "
        "the level histories cannot be judged with it"
    )


def _history(rec: Any) -> History:
    if not isinstance(rec, dict):
        raise ValueError("not a map")
    changes = rec.get("changes")
    if not isinstance(changes, list):
        raise ValueError("no list of changes")
    out: list[Change] = []
    for change in changes:
        if not (isinstance(change, list | tuple) and len(change) == 2):
            raise ValueError("a change is not a pair")
        at, level = change
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise ValueError("a change time is not a finite number")
        if level is not None and not isinstance(level, str):
            raise ValueError("a level is neither a name nor null")
        out.append((float(at), level))
    truncated = rec.get("truncated", False)
    if not isinstance(truncated, bool):
        raise ValueError("truncated is not a boolean")
    return History(tuple(out), truncated)


def in_force(
    records: list[tuple[float, History]], at: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """Per time in ``at``: the index of the last record stamped at or before it; -1 where none
    is (the worker held no history of the user then, or it was compacted away)."""
    stamps = np.asarray([ts for ts, _ in records], dtype=np.float64)
    before = stamps[None, :] <= at[:, None]
    last = stamps.shape[0] - 1 - np.argmax(before[:, ::-1], axis=1)
    return np.where(before.any(axis=1), last, -1).astype(np.int64)


def complete(msgs: Iterable[Msg]) -> bool:
    """Whether ``levels`` holds every record ever written to it (each partition's offsets run
    from 0 without a hole: nothing was compacted or deleted), so that a user without a record
    stamped before a time had no history then."""
    expect: dict[int, int] = {}
    for m in msgs:
        if m.offset != expect.get(m.partition, 0):
            return False
        expect[m.partition] = m.offset + 1
    return True


def check_preferences(
    msgs: list[Msg],
    hist: dict[str, History],
    names: tuple[str, ...],
    marks: dict[int, list[tuple[int, float]]],
    partial_ts: dict[int, float],
    partitions: int,
    lag_s: float,
    verdict: Verdict,
) -> None:
    """Every level change a user asked for on ``preferences`` (in offset order; a tombstone or
    a bad value asks for the default level; asking for the level one already has changes
    nothing) is in the user's history ``hist``, in order, effective at or after the record's
    Kafka time (``level_backdated`` otherwise). Owed are the requests the worker read and
    kept (:func:`_read_in_time`; in their key's partition). A request absent from the history is
    ``level_missing`` once a partial of the user's partition was sent ``lag_s`` after it
    (``partial_ts``: per events partition, the Kafka time of its last partial, in seconds):
    before that the worker may not have read it yet.

    A truncated history holds the tail of the requests: it is judged from the request its
    first change answers, trying each candidate (latest first) and keeping the first that
    explains it; nothing is reported when one does.
    """
    asked: dict[str, list[tuple[float, str | None]]] = defaultdict(list)
    for m in msgs:
        if m.key is None or partition_for(m.key, partitions) != m.partition:
            continue  # the worker dead-letters a preference outside its key's partition
        at = m.timestamp_ms / 1000
        if not _read_in_time(at, m, marks):
            continue
        asked[m.key.decode("utf-8", "replace")].append((at, preferences.decode(m.value).level))
    for user, wants in asked.items():
        h = hist.get(user, History(()))
        p = partition_for(user.encode(), partitions)
        sent = partial_ts.get(p, -math.inf)

        def required(at: float, sent: float = sent) -> bool:
            return sent >= at + lag_s

        if not h.truncated:
            found = _match(user, wants, h.changes, 0, names, required)
        else:
            found = _match_tail(user, wants, h.changes, names, required)
        for v in found:
            verdict.add(v)


def _read_in_time(at: float, m: Msg, marks: dict[int, list[tuple[int, float]]]) -> bool:
    """Whether a preference stamped ``at`` is owed: the worker recorded reading it (an offset
    marker past it), and no later than ``at - SKEW_S`` (else it was stamped past the horizon
    when read, and may have been refused)."""
    read_by = next((t for offset, t in marks.get(m.partition, ()) if offset > m.offset), None)
    return read_by is not None and at <= read_by + SKEW_S


def _same(asked: str | None, stored: str | None, names: tuple[str, ...]) -> bool:
    """Whether a stored change is the requested level (a name the stream does not offer may
    be stored as the default level)."""
    return asked == stored or (stored is None and asked not in names)


def _match(
    user: str,
    wants: list[tuple[float, str | None]],
    changes: tuple[Change, ...],
    start: int,
    names: tuple[str, ...],
    required: Callable[[float], bool],
) -> list[Violation]:
    """The findings when ``wants[start:]`` are matched in order against ``changes``."""
    out: list[Violation] = []
    pos, last = 0, None
    for at, level in wants[start:]:
        if last is not None and _same(level, last[1], names):
            continue  # asking for the level one has changes nothing
        j = next((k for k in range(pos, len(changes)) if _same(level, changes[k][1], names)), None)
        what = f"a change to {level or 'the default level'} requested at {at:.3f}"
        if j is None:
            if required(at):
                detail = f"{what} is not in the user's history"
                out.append(Violation("level_missing", (), detail, (user,)))
            continue
        if changes[j][0] < at:
            detail = f"{what} takes effect at {changes[j][0]:.3f}"
            out.append(Violation("level_backdated", (), detail, (user,)))
        pos, last = j + 1, changes[j]
    return out


def _match_tail(
    user: str,
    wants: list[tuple[float, str | None]],
    changes: tuple[Change, ...],
    names: tuple[str, ...],
    required: Callable[[float], bool],
) -> list[Violation]:
    """:func:`_match` for a truncated history: from the request its first change answers."""
    if not changes:
        return []
    first_at, first_level = changes[0]
    candidates = [
        i for i, (at, lv) in enumerate(wants) if at <= first_at and _same(lv, first_level, names)
    ]
    if not candidates:  # no request explains the first change kept: judge the later ones
        later = next((i for i, (at, _) in enumerate(wants) if at > first_at), len(wants))
        return _match(user, wants, changes, later, names, required)
    latest = _match(user, wants, changes, candidates[-1], names, required)
    if latest and any(
        not _match(user, wants, changes, i, names, required) for i in candidates[:-1]
    ):
        return []
    return latest
