"""Users' requirement levels over time, and the gap rule around every change: written once.

The rule that keeps every window of both levels within budget: after a change from level ``a``
to level ``b`` effective at slot ``e``, the user is not counted (and a device does not answer)
in slots ``[e, e + max(w_a, w_b))`` (:func:`sit_out`). A slot counted under ``a`` (before
``e``) and one counted under ``b`` (from ``e + max(w_a, w_b)`` on) are then more than
``max(w_a, w_b)`` slots apart, so no window of either level holds both. Every change keeps its
own gap, so a user flipping levels every slot is never counted while it flips. A change from an
unknown level (the oldest one kept of a truncated history) sits out the largest window of all.

The service (central collect stage and local releases, :mod:`app.stream`) and the device
(:meth:`app.client.device.Device.change_level`) apply this module; :mod:`app.verify.rules`
restates the rule on its own on purpose, so that the accountant does not vouch for the code it
checks.

:class:`LevelHistories` holds every user's changes, packed (a flag byte, then
:data:`CHANGE_BYTES` per change: the time as a float64 and the level name's one-byte code), and
answers, for a stream's :class:`LevelRule`, where (if anywhere) a user's value of a slot counts.
A change takes effect from the slot after the one its time falls in (:meth:`LevelRule.slot_of`
+ 1), and never before ``floor`` (the caller's first slot not closed yet). A user's history
is one ``bytes`` kept in one dict keyed by the user id, about 160 bytes per user with one change
where a dict of :class:`History` objects took ~400 (``tests/integration/test_level_memory.py``
measures a worker). Level names are coded in the order first seen, the configured ones first;
past :data:`MAX_LEVEL_CODES` distinct names (junk: a stream offers a few levels) a new name is
read as ``None``, which is what a name no stream offers means anyway (the default level).
:class:`History` is the decoded view the ``levels`` topic and the ledger store.

>>> sit_out(4, 2), sit_out(1, 3)
(4, 3)
>>> [level_at(s, 0, [(10, 1)], (5, 3)) for s in (9, 10, 14, 15)]
[0, None, None, 1]
>>> settled_level(14, 0, [(10, 1)], (5, 3)), settled_level(15, 0, [(10, 1)], (5, 3))
(None, 1)
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.dp.errors import DPError

KEEP_CHANGES = 16
"""Changes remembered per user (older ones: the user is not counted before the oldest kept)."""
_CHANGE = struct.Struct("<dB")
CHANGE_BYTES = _CHANGE.size
"""One change packed: its time (float64) and its level's code (one byte)."""
MAX_LEVEL_CODES = 256
"""Distinct level names coded (``None`` included); a name past them reads as ``None``."""
MAX_LEVEL_NAME = 256
"""Longest level name a stored history may carry."""
_TRUNCATED, _WHOLE = b"\x01", b"\x00"


class HistoryError(DPError, ValueError):
    """A stored level history that :meth:`History.to_dict` could not have written: the record
    is refused (dead-lettered or the stored book dropped), never taken half."""


def sit_out(w_from: int, w_to: int) -> int:
    """Slots a user sits out after a change from a level of window ``w_from`` to one of
    ``w_to``: no window of either level then holds slots counted under both."""
    return max(w_from, w_to)


def _gap(current: int | None, new: int, widths: Sequence[int]) -> int:
    return max(widths) if current is None else sit_out(widths[current], widths[new])


def level_at(
    slot: int, start: int | None, changes: Iterable[tuple[int, int]], widths: Sequence[int]
) -> int | None:
    """The level a user's value in ``slot`` counts under, or None (not counted).

    ``start``: the level before the first change (None: unknown, the history was truncated);
    ``changes``: ``(effective slot, level)`` in order; ``widths``: every level's ``w``.
    """
    current = start
    for effective, new in changes:
        if new == current:
            continue
        if slot < effective:
            return current  # None before the oldest change kept of a truncated history
        if slot < effective + _gap(current, new, widths):
            return None
        current = new
    return current


def settled_level(
    slot: int, start: int | None, changes: Iterable[tuple[int, int]], widths: Sequence[int]
) -> int | None:
    """The level a user counts under in ``slot`` *and every later slot*, if its history no
    longer matters from ``slot`` on (every change's gap ended before it); None while a gap (or
    the slots before a change) still reach ``slot``. Arguments as :func:`level_at`."""
    current = start
    for effective, new in changes:
        if new == current:
            continue
        if slot < effective + _gap(current, new, widths):
            return None
        current = new
    return current


class LevelRule(Protocol):
    """What the gap rule needs of a stream (:class:`app.stream.config.StreamConfig` is one)."""

    @property
    def default_level(self) -> int:
        """The level of a user with no history (the strictest)."""

    @property
    def level_widths(self) -> tuple[int, ...]:
        """Every level's window ``w``, in level order."""

    def level_index(self, name: str) -> int | None:
        """The index of level ``name``, or None when the stream does not offer it."""

    def slot_of(self, at: float) -> int:
        """The slot that holds time ``at``."""


@dataclass(frozen=True)
class Change:
    """From time ``at`` (Unix seconds), the user is at ``level`` (None: the default level)."""

    at: float
    level: str | None


@dataclass
class History:
    """A user's changes, oldest first (``truncated``: older ones were dropped)."""

    changes: list[Change]
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The history as plain values (the ``levels`` topic and the ledger store it)."""
        return {"changes": [[c.at, c.level] for c in self.changes], "truncated": self.truncated}

    @classmethod
    def from_dict(cls, data: Any) -> History:
        """The history ``data`` holds; :class:`HistoryError` unless it is one :meth:`to_dict`
        could have written: at most :data:`KEEP_CHANGES` changes of finite times in order,
        each to another level than the one before."""
        if not isinstance(data, dict) or not isinstance(data.get("truncated", False), bool):
            raise HistoryError("history: not a map with a boolean truncated")
        raw = data.get("changes")
        if not isinstance(raw, list) or len(raw) > KEEP_CHANGES:
            raise HistoryError(f"history: changes must be a list of at most {KEEP_CHANGES}")
        changes: list[Change] = []
        for item in raw:
            at, level = item if isinstance(item, list | tuple) and len(item) == 2 else (None, 0)
            if not (
                isinstance(at, int | float)
                and not isinstance(at, bool)
                and math.isfinite(at)
                and (level is None or (isinstance(level, str) and len(level) <= MAX_LEVEL_NAME))
            ):
                raise HistoryError("history: each change must be [finite time, level name or nil]")
            change = Change(float(at), level)
            if changes and (change.at < changes[-1].at or change.level == changes[-1].level):
                raise HistoryError("history: changes out of order or not changing the level")
            changes.append(change)
        return cls(changes, bool(data.get("truncated", False)))


class LevelHistories:
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
        """Record that ``user`` moves to ``level`` at ``max(at, floor)``; the user's new
        history, or None if the level did not change."""
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
        """Take ``user``'s history as stored elsewhere (the ``levels`` topic, a ledger)."""
        self.users[user] = self._pack(history)

    def forget(self, users: Iterable[str]) -> None:
        """Drop the histories of ``users``."""
        for user in list(users):
            self.users.pop(user, None)

    def special(self, users: Iterable[str]) -> set[str]:
        """The users among ``users`` that have a history (everyone else: default level)."""
        return self.users.keys() & set(users)

    def group(self, rule: LevelRule, user: str, slot: int) -> int | None:
        """The level index ``user``'s value in ``slot`` counts under, or None (not counted)."""
        packed = self.users.get(user)
        if packed is None:
            return rule.default_level
        start, changes = self._changes(rule, packed)
        return level_at(slot, start, changes, rule.level_widths)

    def settled(self, rule: LevelRule, user: str, slot: int) -> int | None:
        """:func:`settled_level` of ``user`` (None also when the user has no history)."""
        packed = self.users.get(user)
        if packed is None:
            return None
        start, changes = self._changes(rule, packed)
        return settled_level(slot, start, changes, rule.level_widths)

    def _changes(
        self, rule: LevelRule, packed: bytes
    ) -> tuple[int | None, Iterator[tuple[int, int]]]:
        """The packed history as :func:`level_at` takes it: a name the stream does not offer
        (or None) is its default level; a change applies from the slot after its time's."""
        default, names = rule.default_level, self._names

        def index(code: int) -> int:
            name = names[code]
            found = None if name is None else rule.level_index(name)
            return default if found is None else found

        start = None if packed[:1] == _TRUNCATED else default
        unpacked = _CHANGE.iter_unpack(packed[1:])
        return start, ((rule.slot_of(at) + 1, index(code)) for at, code in unpacked)
