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
records themselves; on others (Tansu) the producer's CreateTime is used.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from app.stream.config import StreamConfig

KEEP_CHANGES = 16
"""Changes remembered per user (older ones: the user is not counted before the oldest kept)."""
_CHANGE = struct.Struct("<dB")
CHANGE_BYTES = _CHANGE.size
"""One change packed: its time (float64) and its level's code (one byte)."""
MAX_LEVEL_CODES = 256
"""Distinct level names coded (``None`` included); a name past them reads as ``None``."""
_TRUNCATED, _WHOLE = b"\x01", b"\x00"


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
    def from_dict(cls, data: dict[str, Any]) -> History:
        changes = [Change(float(at), None if lv is None else str(lv)) for at, lv in data["changes"]]
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
