"""Users' requirement levels over time, and the exclusion gap around every change.

A user with no recorded preference is in the stream's default level (which satisfies every
level). A ``preferences`` record (key: user) changes the user's level from the slot after the
one its *Kafka record timestamp* falls in; the value's own ``ts`` is never trusted for timing.
A tombstone, a malformed value or an unknown level name is a change to the default level: it
goes through the same gap, never a reset without one.

The rule that keeps every window of both levels within budget: after a change from level
``a`` to level ``b`` effective at slot ``e``, the user's events in slots
``[e, e + max(w_a, w_b))`` are not counted (``level_change``). A slot counted under ``a``
(before ``e``) and one counted under ``b`` (from ``e + max(w_a, w_b)`` on) are then more than
``max(w_a, w_b)`` slots apart (one slot of margin), so no window of either level holds both
(``tests/stream/test_preferences_property.py`` checks it on hostile records). Every change keeps its
own gap, so a user flipping levels every slot is never counted while it flips.

Changes are kept as a short history per user (:data:`KEEP_CHANGES`), because the level of a
slot still open depends on every change whose gap reaches it, not only on the latest. A user
whose older changes were dropped is not counted in slots before the oldest change kept.

Memory: a user's history is one packed ``bytes`` (a flag byte, then :data:`CHANGE_BYTES` per
change: the time as a float64 and the level as a one-byte code), kept in one dict keyed by the
user id, about 160 bytes per user with one change where a dict of ``History`` objects took
~400 (``tests/integration/test_level_memory.py`` measures a worker). Level names are coded in
the order first seen, the configured ones first; past :data:`MAX_LEVEL_CODES` distinct names
(junk: a stream offers a few levels) a new name is read as ``None``, which is what a name no
stream offers means anyway (the default level). :class:`History` is the decoded view the
``levels`` topic and the ledger store.

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
import struct
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import msgpack

from app.stream.config import StreamConfig
from app.stream.records import decode_preference
from app.stream.slots import MAX_SKEW_S

KEEP_CHANGES = 16
"""Changes remembered per user (older ones: the user is not counted before the oldest kept)."""
_CHANGE = struct.Struct("<dB")
CHANGE_BYTES = _CHANGE.size
"""One change packed: its time (float64) and its level's code (one byte)."""
MAX_LEVEL_CODES = 256
"""Distinct level names coded (``None`` included); a name past them reads as ``None``."""
_TRUNCATED, _WHOLE = b"\x01", b"\x00"
OFFSET_KEY = b"\x00offset:"
"""Key prefix of the ``levels`` records that hold a partition's next ``preferences`` offset."""
MAX_LEVEL_NAME = 256
"""Longest level name a ``levels`` record may carry."""
MAX_PREFERENCE_PARTITIONS = 1 << 16
"""Offset markers name a partition below this."""


class LevelsError(ValueError):
    """A ``levels`` record the collect stage could not have written."""


@dataclass(frozen=True)
class Change:
    """From time ``at`` (Unix seconds), the user is at ``level`` (None: the default level)."""

    at: float
    level: str | None


@dataclass
class History:
    changes: list[Change]
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The history as the ``levels`` topic stores it."""
        return {"changes": [[c.at, c.level] for c in self.changes], "truncated": self.truncated}

    @classmethod
    def from_dict(cls, data: Any) -> History:
        """The history ``data`` holds; :class:`LevelsError` unless it is one :meth:`to_dict`
        could have written: at most :data:`KEEP_CHANGES` changes of finite times in order,
        each to another level than the one before."""
        if not isinstance(data, dict) or not isinstance(data.get("truncated", False), bool):
            raise LevelsError("history: not a map with a boolean truncated")
        raw = data.get("changes")
        if not isinstance(raw, list) or len(raw) > KEEP_CHANGES:
            raise LevelsError(f"history: changes must be a list of at most {KEEP_CHANGES}")
        changes: list[Change] = []
        for item in raw:
            at, level = item if isinstance(item, list | tuple) and len(item) == 2 else (None, 0)
            if not (
                isinstance(at, int | float)
                and not isinstance(at, bool)
                and math.isfinite(at)
                and (level is None or (isinstance(level, str) and len(level) <= MAX_LEVEL_NAME))
            ):
                raise LevelsError("history: each change must be [finite time, level name or nil]")
            change = Change(float(at), level)
            if changes and (change.at < changes[-1].at or change.level == changes[-1].level):
                raise LevelsError("history: changes out of order or not changing the level")
            changes.append(change)
        return cls(changes, bool(data.get("truncated", False)))


class Preferences:
    """Every user's level changes; :meth:`group` says where (if anywhere) a slot counts.

    ``names``: the level names to code first (the configured levels' names), so that junk names
    can never leave a real one without a code.
    """

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.users: dict[str, bytes] = {}
        """Per user, the packed history (see the module docstring)."""
        self._names: list[str | None] = [None]
        self._codes: dict[str | None, int] = {None: 0}
        for name in names:
            self._code(name)

    def __len__(self) -> int:
        return len(self.users)

    def _code(self, level: str | None) -> int:
        code = self._codes.get(level)
        if code is None:
            if len(self._names) >= MAX_LEVEL_CODES:
                return 0  # junk past the codes: a name no stream offers, the default level
            code = self._codes[level] = len(self._names)
            self._names.append(level)
        return code

    def _pack(self, history: History) -> bytes:
        head = _TRUNCATED if history.truncated else _WHOLE
        return head + b"".join(_CHANGE.pack(c.at, self._code(c.level)) for c in history.changes)

    def _unpack(self, packed: bytes) -> History:
        names = self._names
        changes = [Change(at, names[code]) for at, code in _CHANGE.iter_unpack(packed[1:])]
        return History(changes, packed[:1] == _TRUNCATED)

    def history(self, user: str) -> History | None:
        """``user``'s history (None: the user never chose a level here)."""
        packed = self.users.get(user)
        return None if packed is None else self._unpack(packed)

    def histories(self) -> Iterator[tuple[str, History]]:
        """Every user with a history, and the history."""
        for user, packed in self.users.items():
            yield user, self._unpack(packed)

    def change(self, user: str, level: str | None, at: float, floor: float) -> History | None:
        """Record one ``preferences`` record: ``user`` moves to ``level`` at ``max(at, floor)``;
        the user's new history, or None if the level did not change."""
        code = self._code(level)
        packed = self.users.get(user, _WHOLE)
        when = max(at, floor)
        if len(packed) > 1:
            last_at, last_code = _CHANGE.unpack_from(packed, len(packed) - CHANGE_BYTES)
            if last_code == code:
                return None  # no change of level
            when = max(when, last_at)  # changes apply in the order they were read
        packed += _CHANGE.pack(when, code)
        if len(packed) > 1 + KEEP_CHANGES * CHANGE_BYTES:
            packed = _TRUNCATED + packed[1 + CHANGE_BYTES :]
        self.users[user] = packed
        return self._unpack(packed)

    def restore(self, user: str, history: History) -> None:
        """Take ``user``'s history as a previous owner applied it (the ``levels`` topic)."""
        self.users[user] = self._pack(history)

    def forget(self, users: Iterable[str]) -> None:
        """Drop the histories of ``users`` (their partition moved to another worker)."""
        for user in list(users):
            self.users.pop(user, None)

    def group(self, stream: StreamConfig, user: str, slot: int) -> int | None:
        """The level index ``user``'s value in ``slot`` counts under, or None (not counted)."""
        packed = self.users.get(user)
        if packed is None:
            return stream.default_level
        return _group(stream, self._names, packed, slot)

    def settled(self, stream: StreamConfig, user: str, slot: int) -> int | None:
        """The level index ``user`` counts under in ``slot`` *and every later slot*, if its
        history no longer matters from ``slot`` on (every change's gap has ended before it);
        None while a gap reaches ``slot`` or beyond (or the user has no history)."""
        packed = self.users.get(user)
        if packed is None:
            return None
        return _settled(stream, self._names, packed, slot)

    def special(self, users: Iterable[str]) -> set[str]:
        """The users among ``users`` that have a history (everyone else: default level)."""
        return self.users.keys() & set(users)


def _index(stream: StreamConfig, level: str | None) -> int:
    found = None if level is None else stream.level_index(level)
    return stream.default_level if found is None else found


def _group(stream: StreamConfig, names: list[str | None], packed: bytes, slot: int) -> int | None:
    clock = stream.slots
    widths = [level.w for level in stream.levels]
    current: int | None = None if packed[:1] == _TRUNCATED else stream.default_level
    for at, code in _CHANGE.iter_unpack(packed[1:]):
        new = _index(stream, names[code])
        if new == current:
            continue
        effective = clock.slot_of(at) + 1
        if slot < effective:
            return current  # None before the oldest change kept of a truncated history
        gap = max(widths) if current is None else max(widths[current], widths[new])
        if slot < effective + gap:
            return None
        current = new
    return current


def _settled(stream: StreamConfig, names: list[str | None], packed: bytes, slot: int) -> int | None:
    clock = stream.slots
    widths = [level.w for level in stream.levels]
    current: int | None = None if packed[:1] == _TRUNCATED else stream.default_level
    for at, code in _CHANGE.iter_unpack(packed[1:]):
        new = _index(stream, names[code])
        if new == current:
            continue
        gap = max(widths) if current is None else max(widths[current], widths[new])
        if slot < clock.slot_of(at) + 1 + gap:
            return None  # this change's gap (or the slots before it) still reach ``slot``
        current = new
    return current


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
    return UserLevels(user, History.from_dict(_unpacked(value)))


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
