"""Users' requirement levels over time, and the exclusion gap around every change.

A user with no recorded preference is in the stream's default level (which satisfies every
level). A ``preferences`` record (key: user) changes the user's level from the slot after the
one its *Kafka record timestamp* falls in; the value's own ``ts`` is never trusted for timing.
A tombstone, a malformed value or an unknown level name is a change to the default level: it
goes through the same gap, never a reset without one.

The gap rule around every change, and the packed histories it reads, are the core's
(:mod:`app.dp.levels`): the collect stage's :class:`Preferences` is
:class:`~app.dp.levels.LevelHistories`, asked with the stream as the
:class:`~app.dp.levels.LevelRule` (``tests/stream/test_preferences_property.py`` checks on
hostile records that no window of a level mixes two). Changes are kept as a short history per
user (:data:`~app.dp.levels.KEEP_CHANGES`), because the level of a slot still open depends on
every change whose gap reaches it, not only on the latest; a user whose older changes were
dropped is not counted in slots before the oldest change kept.

Time: a change never takes effect before ``floor``, the first slot the collect stage has not
closed yet (the caller passes it): a backdated record cannot move a user out of slots already
released. Brokers that honour the topic's ``message.timestamp.type: LogAppendTime`` stamp the
records themselves; on others (Tansu) the producer's CreateTime is used. A record stamped past
the horizon (the wall clock plus the allowed skew, :func:`too_far`) is refused like such an
event: it would pin the user's level to a slot far ahead.

The internal ``levels`` topic (:func:`decode_levels`) is an input too: a record that is not a
history or an offset marker the collect stage could have written is a :class:`LevelsError`
(refused, counted, dead-lettered, never a crash), and :class:`LevelsRestore` checks the
histories a new owner restores against the users' own ``preferences`` records: a history whose
current level the user never asked for, one that puts a change before the request that asked
for it, or a user whose request has no history, is replaced by one that does not count the user
until ``max w`` slots after the takeover (the gap rule, from an unknown level).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack

from app.dp.levels import KEEP_CHANGES, Change, History, HistoryError
from app.dp.levels import LevelHistories as Preferences
from app.stream.config import StreamConfig
from app.stream.records import decode_preference
from app.stream.slots import MAX_SKEW_S

__all__ = [
    "KEEP_CHANGES",
    "Change",
    "History",
    "LevelsError",
    "LevelsRestore",
    "OffsetMark",
    "Preferences",
    "UserLevels",
    "decode_levels",
    "encode_history",
    "encode_mark",
    "too_far",
]

OFFSET_KEY = b"\x00offset:"
"""Key prefix of the ``levels`` records that hold a partition's next ``preferences`` offset."""


class LevelsError(ValueError):
    """A ``levels`` record the collect stage could not have written."""


def too_far(at: float, now: float, streams: Iterable[StreamConfig]) -> bool:
    """Whether a ``preferences`` record stamped ``at`` lies past the horizon of the streams'
    slot clocks at wall time ``now`` (the nearest: a record past any stream's is refused)."""
    horizon = min((s.slots.horizon(now) for s in streams), default=now + MAX_SKEW_S)
    return not math.isfinite(at) or at > horizon


# -- the levels topic ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OffsetMark:
    """A ``levels`` offset marker: ``preferences`` partition ``partition`` is applied up to
    ``offset`` (the next offset to apply)."""

    partition: int
    offset: int


@dataclass(frozen=True)
class UserLevels:
    """A ``levels`` record of one user (``history`` None: a tombstone)."""

    user: str
    history: History | None


def encode_history(history: History) -> bytes:
    out: bytes = msgpack.packb(history.to_dict(), use_single_float=False)
    return out


def encode_mark(offset: int) -> bytes:
    out: bytes = msgpack.packb({"offset": offset})
    return out


def decode_levels(
    key: bytes | None, value: bytes | None, partition: int
) -> OffsetMark | UserLevels:
    """One ``levels`` record of ``partition``; :class:`LevelsError` (never another exception)
    unless the collect stage could have written it: an offset marker of this very partition
    with a non-negative offset, or a user's history under its UTF-8 id."""
    if not isinstance(key, bytes) or not key:
        raise LevelsError("no key")
    if key.startswith(OFFSET_KEY):
        digits = key[len(OFFSET_KEY) :]
        if not digits.isdigit() or len(digits) > 5 or int(digits) != partition:
            raise LevelsError("offset marker of another partition")
        found = _unpacked(value)
        offset = found.get("offset") if isinstance(found, dict) else None
        if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset < 2**63:
            raise LevelsError("offset marker without a non-negative offset")
        return OffsetMark(partition, offset)
    try:
        user = key.decode("utf-8")
    except UnicodeDecodeError:
        raise LevelsError("user key not UTF-8") from None
    if user.startswith("\x00"):
        raise LevelsError("unknown marker")
    if value is None:
        return UserLevels(user, None)
    try:
        return UserLevels(user, History.from_dict(_unpacked(value)))
    except HistoryError as exc:
        raise LevelsError(str(exc)) from None


def _unpacked(value: bytes | None) -> Any:
    if not isinstance(value, bytes):
        raise LevelsError("no value")
    try:
        return msgpack.unpackb(value, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - any failure of the unpacker is a refusal
        raise LevelsError(f"not msgpack: {type(exc).__name__}") from None


class LevelsRestore:
    """What a new owner of a partition restores from ``levels``, checked against the users'
    ``preferences`` records the previous owner applied (see the module docstring).

    Feed it the partition's ``levels`` records (:meth:`add`: the last per user wins, as
    compaction keeps it) and its ``preferences`` records before the offset marker, in offset
    order (:meth:`asked`); then :meth:`histories` says what to restore, and why a history was
    replaced. ``names``: the level names some stream offers (any other name is the default).
    """

    def __init__(self, names: Iterable[str]) -> None:
        self.names = set(names)
        self.stored: dict[str, History | None] = {}
        self.requests: dict[str, list[tuple[float, str | None]]] = defaultdict(list)
        self.starts: dict[int, int] = {}

    def add(self, found: OffsetMark | UserLevels) -> None:
        if isinstance(found, OffsetMark):
            self.starts[found.partition] = found.offset
        else:
            self.stored[found.user] = found.history

    def asked(self, user: str, value: bytes | None, at: float) -> None:
        """A ``preferences`` record of ``user`` the previous owner applied (``at``: its Kafka
        time)."""
        self.requests[user].append((at, self._name(decode_preference(value))))

    def _name(self, level: str | None) -> str | None:
        return level if level in self.names else None

    def why(self, user: str) -> str:
        """Why ``user``'s stored history cannot be what its requests made ("" if it can)."""
        history = self.stored.get(user)
        asked = self.requests.get(user, [])
        last = self._name(history.changes[-1].level) if history and history.changes else None
        if not asked:
            return "" if last is None else "a level the user never asked for"
        level = asked[-1][1]
        if last != level:
            return "not the level the user last asked for"
        run = len(asked) - 1
        while run > 0 and asked[run - 1][1] == level:
            run -= 1
        if run > 0 and history is not None and history.changes[-1].at < asked[run][0]:
            return "a change effective before the user asked for it"
        return ""

    def histories(self, now: float) -> Iterator[tuple[str, History, str]]:
        """``(user, history to restore, why the stored one was replaced or "")``: a replaced
        user is not counted before ``now``, then sits out a gap from an unknown level."""
        for user in sorted(self.stored.keys() | self.requests.keys()):
            why = self.why(user)
            history = self.stored.get(user)
            if why:
                level = self.requests[user][-1][1] if self.requests.get(user) else None
                yield user, History([Change(now, level)], truncated=True), why
            elif history is not None:
                yield user, history, ""
