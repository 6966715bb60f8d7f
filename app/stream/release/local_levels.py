"""The levels of a personalized local stream: users' choices from ``preferences``, slot by slot.

In local mode the service itself holds every registered user's level (PLDP-IDS: the levels are
public to the server), because a collection request must say which budget each cohort member
uses (:attr:`~app.dp.local.wire.CollectionRequest.levels`) and the population ledger checks every
user's own window. A local stream's users are the indices ``0 .. users-1``, so a ``preferences``
record counts for it when its key is one of them in decimal (``"17"``); other keys belong to
central streams and are skipped. The rule is central mode's, the core's (:mod:`app.dp.levels`):

* a record changes the user's level from the slot after its Kafka timestamp, and never before
  the slot being opened when it is read (``floor``: the previous slot's start): a request
  already sent keeps the levels it named. A device that changes its level in slot ``t`` does
  so from ``t + 1`` on, so the two agree when the record is read as slot ``t + 1`` opens. The
  records read before the stream's first slot are the users' levels from the start (nobody
  has reported yet: no gap);
* after a change from ``a`` to ``b`` the user sits out (:data:`~app.dp.local.wire.SITS_OUT`: not
  asked, its reports not counted) for ``max(w_a, w_b)`` slots; the device keeps the same rule
  (:meth:`~app.client.device.Device.change_level`);
* a tombstone, a malformed value or an unknown level name is a change to the default level (the
  strictest), through the same gap; a user with no record is at the default level.

:class:`LevelBook` is that bookkeeping (pure: ``tests/stream`` drives it directly): the histories
of the users who ever chose a level and the next offset per ``preferences`` partition. It lives
in the stream's ledger entry (``levels``) and is written with the mechanism state when a slot
opens, so a restart goes on from exactly the histories the requests were built on. Re-reading
the topic after a restart instead would apply a change with a later floor, and could count a
user under its old level after slots it already reported under the new one.
:class:`PreferenceReader` reads the topic from the book's offsets to its end (the worker's).
Size: once a user's last change is older than its gap (:meth:`LevelBook.settle`, as each slot
opens), the user costs one byte, in an array of every user's settled level (stored compressed in
the ledger entry, only once someone settled at another level than the default); only users
still in a gap keep a history (packed in memory, about 30 bytes each in the ledger entry).

>>> from app.stream.config.streams import parse_stream
>>> s = parse_stream({"id": "s", "mode": "local", "labels": ["a", "b"], "slot_s": 10.0,
...     "round_s": 1.0, "release_timeout_s": 1.0,
...     "mechanism": {"name": "plpa", "params": {"users": [10, 10]}},
...     "levels": [{"name": "strict", "w": 4, "eps": 1.0}, {"name": "open", "w": 2, "eps": 2.0}]},
...     "doc", {})
>>> book = LevelBook(s.users)
>>> opened = b"\\x81\\xa5level\\xa4open"  # msgpack {"level": "open"}, at 55 s (slot 5)
>>> book.apply([PreferenceRecord(0, 0, b"3", opened, 55_000)], floor=60.0)  # as slot 7 opens
>>> book.vector(s, 6)[2:5].tolist(), book.vector(s, 7)[2:5].tolist()  # gap: slots 7 .. 10
([0, 0, 0], [0, 255, 0])
>>> book.vector(s, 11)[2:5].tolist()
[0, 1, 0]
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from app import metrics
from app.dp.levels import Change, History, HistoryError, LevelHistories
from app.dp.local.wire import SITS_OUT
from app.stream.config import Settings, StreamConfig
from app.stream.internal import StateError
from app.stream.records import decode_preference

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreferenceRecord:
    """One ``preferences`` record as the book needs it (``timestamp_ms``: the Kafka timestamp)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


SETTLED_AT = -1e12
"""The time of the change a settled user's history starts from when it changes again: long
before any slot, so that change's own gap is over in every slot the book is asked about."""

BOOK_ERRORS = (HistoryError, zlib.error, ValueError, TypeError, AttributeError)
"""What reading a stored book that is not one raises (garbage in the ledger's changelog)."""

ReadPreferences = Callable[[dict[int, int]], Awaitable[list[PreferenceRecord]]]
"""Reads ``preferences`` from the given next offsets (per partition; absent: the beginning)."""


class LevelBook:
    """The level histories of one local stream's users; see the module docstring."""

    def __init__(self, users: int, names: Iterable[str] = ()) -> None:
        self.users = users
        self.preferences = LevelHistories(names)
        self.offsets: dict[int, int] = {}
        """Per ``preferences`` partition, the next offset to apply."""
        self.settled: npt.NDArray[np.uint8] | None = None
        """Per user, the level of a user whose history no longer matters (:meth:`settle`);
        None: everyone without a history is at the default level."""
        self.settled_names: list[str] = []
        """The level names of the indices in :attr:`settled` (the stream's levels)."""
        self.default = 0
        """The index of the default level in :attr:`settled_names`."""

    def apply(
        self,
        records: Iterable[PreferenceRecord],
        floor: float,
        initial: bool = False,
        horizon: float = math.inf,
    ) -> None:
        """Take records in offset order; none takes effect before the slot after ``floor``'s.

        ``initial``: the stream has not asked anybody yet (its first slot opens), so a user's
        choice is its level from the start, without a gap: no window can mix two levels of a
        user who never reported. A record stamped past ``horizon`` (the wall clock plus the
        allowed skew) is refused, counted and logged: it would pin the user's level far ahead.
        """
        for rec in records:
            if rec.offset < self.offsets.get(rec.partition, 0):
                continue  # read twice (a reader that went back): applied already
            self.offsets[rec.partition] = rec.offset + 1
            user = self._user(rec.key)
            if user is not None and rec.timestamp_ms / 1000 > horizon:
                metrics.INTERNAL_REFUSED.labels("preferences", "future").inc()
                log.error("preference refused: stamped past the horizon offset=%d", rec.offset)
            elif user is not None:
                level = decode_preference(rec.value)
                at = 0.0 if initial else rec.timestamp_ms / 1000
                self._unsettle(user)
                self.preferences.change(user, level, at, 0.0 if initial else floor)

    def _unsettle(self, user: str) -> None:
        """A settled user at a level other than the default changes again: its history starts
        from that level, as if chosen long ago (the new change's gap is measured from it)."""
        if self.settled is None or user in self.preferences.users:
            return
        name = self.settled_names[int(self.settled[int(user)])]
        if name != self.settled_names[self.default]:
            self.preferences.restore(user, History([Change(SETTLED_AT, name)]))

    def _user(self, key: bytes | None) -> str | None:
        """The canonical decimal key of a registered user, or None (not this stream's)."""
        try:
            text = (key or b"").decode("ascii")
        except UnicodeDecodeError:
            return None
        if not text.isdigit() or str(int(text)) != text or int(text) >= self.users:
            return None
        return text

    def vector(self, stream: StreamConfig, slot: int) -> npt.NDArray[np.uint8]:
        """Every user's level index at ``slot`` (:data:`SITS_OUT` during a gap)."""
        if self.settled is None:
            out = np.full(self.users, stream.default_level, dtype=np.uint8)
        else:
            out = self.settled.copy()
        for user in self.preferences.users:  # only the users with a history: few, not all
            group = self.preferences.group(stream, user, slot)
            out[int(user)] = SITS_OUT if group is None else group
        return out

    def settle(self, stream: StreamConfig, slot: int) -> None:
        """Fold the histories that no longer matter from ``slot`` on into :attr:`settled`.

        A user whose every change's gap ended before ``slot`` is at one level in ``slot`` and
        every later slot until it changes again: one byte in :attr:`settled` (nothing at all
        at the default level) instead of a history. The book is asked about ``slot`` and later
        slots only (the slot opening, then the next ones; a restart opens the same slot again
        from the book stored with it), so :meth:`vector` answers as before.
        """
        default = stream.default_level
        for user in list(self.preferences.users):
            level = self.preferences.settled(stream, user, slot)
            if level is None:
                continue
            if self.settled is None and level != default:
                self.settled = np.full(self.users, default, dtype=np.uint8)
                self.settled_names = [lv.name for lv in stream.levels]
                self.default = default
            if self.settled is not None:
                self.settled[int(user)] = level
            self.preferences.forget([user])

    def to_dict(self) -> dict[str, Any]:
        """The book as the ledger entry stores it."""
        out: dict[str, Any] = {
            "offsets": {str(p): o for p, o in self.offsets.items()},
            "users": {u: h.to_dict() for u, h in self.preferences.histories()},
        }
        if self.settled is not None:
            out["settled"] = zlib.compress(self.settled.tobytes())
            out["settled_names"] = list(self.settled_names)
            out["settled_default"] = self.default
        return out

    @classmethod
    def from_dict(
        cls, users: int, data: dict[str, Any] | None, names: Iterable[str] = (), key: str = ""
    ) -> LevelBook:
        """The book a ledger entry stored; ``names``: the stream's level names (coded first).
        A :class:`~app.stream.internal.StateError` (``key``: the ledger key) if it is not one."""
        try:
            return cls._from_dict(users, data, names)
        except BOOK_ERRORS as exc:
            raise StateError("ledger", key, f"levels book malformed: {exc}") from None

    @classmethod
    def _from_dict(cls, users: int, data: Any, names: Iterable[str]) -> LevelBook:
        book = cls(users, names)
        if not data:
            return book
        offsets, stored = data.get("offsets"), data.get("users")
        if not (
            isinstance(offsets, dict)
            and all((_whole(p) or str(p).isdigit()) and _whole(o) for p, o in offsets.items())
            and isinstance(stored, dict)
        ):
            raise ValueError("levels book: offsets or users malformed")
        book.offsets = {int(p): int(o) for p, o in offsets.items()}
        for user, hist in stored.items():
            if not isinstance(user, str) or book._user(user.encode()) is None:
                raise ValueError("a user key that is not a registered user")
            book.preferences.restore(user, History.from_dict(hist))
        if data.get("settled") is not None:
            settled, names_, default = (
                data["settled"],
                data.get("settled_names"),
                data.get("settled_default"),
            )
            if not (
                isinstance(settled, bytes)
                and isinstance(names_, list)
                and all(isinstance(n, str) for n in names_)
                and _whole(default)
            ):
                raise ValueError("levels book: settled levels malformed")
            levels = np.frombuffer(zlib.decompress(settled), dtype=np.uint8)
            if len(levels) != users:
                raise ValueError(f"levels book: {len(levels)} settled users, not {users}")
            if not default < len(names_) or (len(levels) and int(levels.max()) >= len(names_)):
                raise ValueError("levels book: a settled level without a name")
            book.settled, book.settled_names, book.default = levels.copy(), names_, default
        return book


def _whole(value: Any) -> bool:
    """A non-negative int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class PreferenceReader:
    """Reads the whole ``preferences`` topic from given offsets to its current end (aiokafka,
    manual assignment of every partition, no consumer group).

    The consumer stays assigned between reads, so its background fetches keep the records and
    the high watermarks current: a read at a slot's open only drains what was fetched already,
    and seeks (one broker round trip) only when the offsets asked for are not where the last
    read stopped (the first read, or after a restart)."""

    def __init__(self, settings: Settings, topic: str, timeout_s: float = 10.0) -> None:
        self.settings, self.topic, self.timeout_s = settings, topic, timeout_s
        self._consumer: Any = None
        self._next: dict[int, int] = {}
        """Per partition, the offset after the last record returned."""

    async def _assigned(self) -> tuple[Any, list[Any]]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from app.stream.kafka import aiokafka_kwargs

        if self._consumer is None:
            self._consumer = AIOKafkaConsumer(
                enable_auto_commit=False, **aiokafka_kwargs(self.settings)
            )
            await self._consumer.start()
        consumer = self._consumer
        parts = consumer.partitions_for_topic(self.topic)
        if not parts:
            await consumer.topics()
            parts = consumer.partitions_for_topic(self.topic) or set()
        tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
        if set(tps) != set(consumer.assignment()):
            consumer.assign(tps)
            self._next = {}
        return consumer, tps

    async def read(self, offsets: dict[int, int]) -> list[PreferenceRecord]:
        import asyncio

        consumer, tps = await self._assigned()
        if not tps:
            return []
        moved = [tp for tp in tps if self._next.get(tp.partition) != offsets.get(tp.partition, 0)]
        if moved:
            starts = await consumer.beginning_offsets(moved)
            for tp in moved:
                consumer.seek(tp, max(offsets.get(tp.partition, 0), starts[tp]))
        # The end is each partition's high watermark as fetch responses report it, not
        # ListOffsets, which Tansu answers with the last batch's base offset + 1 (1 for 200
        # records produced in one batch). A record the last fetch missed waits one slot.
        out: list[PreferenceRecord] = []
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.timeout_s
        wait_ms = 200 if moved else 0  # drained at once when the fetches kept up
        while True:
            batches = await consumer.getmany(*tps, timeout_ms=wait_ms)
            for tp, records in batches.items():
                out.extend(
                    PreferenceRecord(tp.partition, r.offset, r.key, r.value, r.timestamp)
                    for r in records
                )
            ends = [consumer.highwater(tp) for tp in tps]
            positions = [await consumer.position(tp) for tp in tps]
            if all(h is not None and p >= h for h, p in zip(ends, positions, strict=True)):
                break
            if loop.time() > give_up:
                raise TimeoutError(f"reading {self.topic} to its end took over {self.timeout_s} s")
            wait_ms = 200  # not at the end yet: wait for the fetches
        self._next = {tp.partition: p for tp, p in zip(tps, positions, strict=True)}
        return out  # in offset order per partition (a user's records share one)

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()
            self._consumer = None
