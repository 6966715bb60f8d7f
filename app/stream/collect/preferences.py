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

Time: a change never takes effect before ``floor``, the first slot the collect stage has not
closed yet (the caller passes it): a backdated record cannot move a user out of slots already
released. Brokers that honour the topic's ``message.timestamp.type: LogAppendTime`` stamp the
records themselves; on others (Tansu) the producer's CreateTime is used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from app.stream.config import StreamConfig

KEEP_CHANGES = 16
"""Changes remembered per user (older ones: the user is not counted before the oldest kept)."""


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
    """Every user's level changes; :meth:`group` says where (if anywhere) a slot counts."""

    def __init__(self) -> None:
        self.users: dict[str, History] = {}

    def __len__(self) -> int:
        return len(self.users)

    def change(self, user: str, level: str | None, at: float, floor: float) -> History | None:
        """Record one ``preferences`` record: ``user`` moves to ``level`` at ``max(at, floor)``;
        the user's new history, or None if the level did not change."""
        hist = self.users.get(user)
        if hist is None:
            hist = self.users[user] = History([])
        when = max(at, floor)
        last = hist.changes[-1] if hist.changes else None
        if last is not None and last.level == level:
            return None  # no change of level
        if last is not None and when < last.at:
            when = last.at  # changes apply in the order they were read
        hist.changes.append(Change(when, level))
        if len(hist.changes) > KEEP_CHANGES:
            del hist.changes[0]
            hist.truncated = True
        return hist

    def restore(self, user: str, history: History) -> None:
        """Take ``user``'s history as a previous owner applied it (the ``levels`` topic)."""
        self.users[user] = history

    def forget(self, users: Iterable[str]) -> None:
        """Drop the histories of ``users`` (their partition moved to another worker)."""
        for user in list(users):
            self.users.pop(user, None)

    def group(self, stream: StreamConfig, user: str, slot: int) -> int | None:
        """The level index ``user``'s value in ``slot`` counts under, or None (not counted)."""
        hist = self.users.get(user)
        if hist is None:
            return stream.default_level
        return _group(stream, hist, slot)

    def special(self, users: Iterable[str]) -> set[str]:
        """The users among ``users`` that have a history (everyone else: default level)."""
        return self.users.keys() & set(users)


def _index(stream: StreamConfig, level: str | None) -> int:
    found = None if level is None else stream.level_index(level)
    return stream.default_level if found is None else found


def _group(stream: StreamConfig, hist: History, slot: int) -> int | None:
    clock = stream.slots
    widths = [level.w for level in stream.levels]
    current: int | None = None if hist.truncated else stream.default_level
    for change in hist.changes:
        new = _index(stream, change.level)
        if new == current:
            continue
        effective = clock.slot_of(change.at) + 1
        if slot < effective:
            return current  # None before the oldest change kept of a truncated history
        gap = max(widths) if current is None else max(widths[current], widths[new])
        if slot < effective + gap:
            return None
        current = new
    return current
