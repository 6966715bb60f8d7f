"""The internal wire: what the collect stages tell the release agent, typed, one codec each.

Three frozen types travel on the internal ``partials`` topic (key: the stream id, so one
stream's messages stay in order on one partition), each with ``encode()`` and one
:func:`decode` for all:

* :class:`Partial`: one ``events`` partition's counts (``groups x d``, row-major; a sum
  stream's sums) for one slot it closed;
* :class:`OpenPartial`: the same for an open-domain stream (``domain: open``): the bounded
  counts per group of the keys the partition's users kept, with the keys (sorted), split in
  chunks that each fit a Kafka message;
* :class:`Tick`: per partition the sender owns, the event time it is complete up to (local
  streams send empty ticks: the agent's clock);
* :class:`PartitionTally`: one ``reports`` partition's support counts and report counts of one
  round.

:func:`decode` checks every field's type and range, so a malformed message (a fault, or
something else writing to the topic) is an :class:`InternalError` the release agent refuses,
never another exception inside it: ids and rounds are short strings, slots and partitions
non-negative ints below :data:`MAX_SLOT` and :data:`MAX_PARTITIONS`, times finite, counts
finite non-negative numbers up to :data:`MAX_COUNT` (a count stream's and a tally's are ints),
at most :data:`MAX_CELLS` of them; an open partial's keys non-empty strings of at most
:data:`MAX_KEY_CHARS` characters, sorted and distinct, its counts as many per group as keys.
What a well-formed message may claim for its stream (its shape, its partitions, its time, how
many users a partition could have sent) is the guard's business
(:mod:`app.stream.release.guard`).

The release agent's own records in the ``slots`` table are typed here too: :class:`OpenSlot`
(a central slot's merged partials) and :class:`OpenRound` (a local round's merged tallies),
each map ``slot -> record`` with one codec (:func:`encode_open_slots`,
:func:`decode_open_slots`, :func:`encode_open_round`, :func:`decode_open_round`), and the central
driver's digests of released slots (:func:`decode_merged`). The bytes are those of earlier
releases (same msgpack keys), so a running deployment upgrades in place. The table's changelog
is a topic too: a value that is not such a record is a :class:`StateError`, checked with the
same ranges as the wire, never a ``KeyError`` or an ``OverflowError`` later.

>>> p = Partial("s", 12, 1, 4, [1, 0, 2])
>>> decode(p.encode()) == p
True
>>> o = OpenPartial("urls", 12, 1, 4, ("a.com", "b.org"), [3, 1, 0, 2])  # 2 groups x 2 keys
>>> decode(o.encode()) == o
True
>>> decode(Tick("s", {3: 120.0}, 4).encode())
Tick(stream='s', progress={3: 120.0}, partitions=4)
>>> decode(b"\\x80")
Traceback (most recent call last):
...
app.stream.internal.InternalError: not an internal message: no kind
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
import numpy.typing as npt

MAX_ID = 256
"""Longest stream id or round name a message may carry (characters)."""
MAX_SLOT = 2**48
"""Slots are below this (a slot of a millisecond since 1970 stays far below it)."""
MAX_PARTITIONS = 1 << 16
"""Partition counts are at most this (Kafka's practical limit is far lower)."""
MAX_CELLS = 1 << 20
"""Most counts one message may carry (``groups x d``; a tally's ``m x d``)."""
MAX_KEY_CHARS = 4096
"""Longest key an open partial may carry (characters; a stream's ``max_key_chars`` is at most
this)."""
MAX_CHUNKS = 1 << 16
"""Most chunks one open partial may be split in (:attr:`OpenPartial.chunks`)."""
OPEN_CHUNK_BYTES = 512 << 10
"""About the most bytes of keys and counts one :class:`OpenPartial` carries (half the Kafka
producer's default request limit): :func:`open_partials` splits a slot past it in chunks."""
MAX_COUNT = 2**53
"""Largest count or sum a message may claim: exact as a float64, and any sum of
:data:`MAX_PARTITIONS` of them fits an int64."""


class InternalError(ValueError):
    """A ``partials`` value that is not a well-formed internal message."""


class StateError(ValueError):
    """A ``ledger`` or ``slots`` table value that is not a well-formed record (its changelog
    is a topic: garbage there must be refused, never crash the agent)."""

    def __init__(self, table: str, key: str, why: str) -> None:
        super().__init__(f"{table} table: value of {key[:64]!r} refused: {why}")
        self.table, self.key, self.why = table, key, why


@dataclass(frozen=True)
class Partial:
    """One ``events`` partition's counts (``groups x d``, row-major) for one closed slot."""

    stream: str
    slot: int
    partition: int
    partitions: int
    """The ``events`` topic's partition count as the sender knows it."""
    counts: list[int] | list[float]
    """Counts of users, or for a sum stream the clipped amounts' sums."""

    def encode(self) -> bytes:
        return _pack(
            {
                "kind": "partial",
                "stream": self.stream,
                "slot": self.slot,
                "partition": self.partition,
                "partitions": self.partitions,
                "counts": self.counts,
            }
        )


@dataclass(frozen=True)
class OpenPartial:
    """One ``events`` partition's bounded key counts of an open-domain stream for one closed
    slot, or one chunk of them.

    ``keys`` are the distinct keys that some user of the partition kept in the slot (each user
    at most ``max_keys`` of them, :mod:`app.stream.collect.open_keys`), sorted and distinct;
    ``counts`` is row-major ``groups x len(keys)``: one row per requirement group, in the
    order of the central :class:`Partial`'s rows (the stream's levels), the users of that group
    who kept each key. A slot with many keys is split in ``chunks`` messages (``chunk`` in
    ``0 .. chunks - 1``) that each fit a Kafka message: their keys are disjoint, and every key
    of chunk ``i`` sorts before every key of chunk ``i + 1``. A partition's slot is whole once
    all its chunks arrived; an empty slot is one chunk without keys."""

    stream: str
    slot: int
    partition: int
    partitions: int
    """The ``events`` topic's partition count as the sender knows it."""
    keys: tuple[str, ...]
    counts: list[int]
    chunk: int = 0
    chunks: int = 1

    def encode(self) -> bytes:
        return _pack(
            {
                "kind": "open_partial",
                "stream": self.stream,
                "slot": self.slot,
                "partition": self.partition,
                "partitions": self.partitions,
                "keys": list(self.keys),
                "counts": self.counts,
                "chunk": self.chunk,
                "chunks": self.chunks,
            }
        )


def open_partials(
    stream: str,
    slot: int,
    partition: int,
    partitions: int,
    keys: Sequence[str],
    counts: npt.ArrayLike,
    groups: int,
) -> list[OpenPartial]:
    """One partition's closed slot of an open stream as :class:`OpenPartial` chunks: ``keys``
    sorted and distinct, ``counts`` their ``groups x len(keys)`` matrix. A chunk holds keys
    and counts of about :data:`OPEN_CHUNK_BYTES` at most (a key's UTF-8 bytes and a header,
    9 bytes per count), so no message passes the producer's limit; an empty slot is one chunk.

    >>> [len(p.keys) for p in open_partials("s", 1, 0, 1, ["a", "b"], [[1, 2]], 1)]
    [2]
    >>> open_partials("s", 1, 0, 1, [], [], 2)[0].counts
    []
    """
    cells = np.asarray(counts, dtype=np.int64).reshape(groups, len(keys))
    if not keys:
        return [OpenPartial(stream, slot, partition, partitions, (), [])]
    size = np.fromiter(map(len, map(str.encode, keys)), dtype=np.int64, count=len(keys))
    chunk = np.cumsum(size + 5 + 9 * groups) // OPEN_CHUNK_BYTES  # non-decreasing, no gap
    bounds = [0, *(np.flatnonzero(np.diff(chunk)) + 1).tolist(), len(keys)]
    chunks = len(bounds) - 1
    return [
        OpenPartial(
            stream,
            slot,
            partition,
            partitions,
            tuple(keys[a:b]),
            cells[:, a:b].reshape(-1).tolist(),
            i,
            chunks,
        )
        for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))
    ]


@dataclass(frozen=True)
class Tick:
    """Per partition the sender owns, the event time it is complete up to."""

    stream: str
    progress: dict[int, float]
    partitions: int

    def encode(self) -> bytes:
        progress = {int(p): float(t) for p, t in self.progress.items()}
        return _pack(
            {
                "kind": "tick",
                "stream": self.stream,
                "progress": progress,
                "partitions": self.partitions,
            }
        )


@dataclass(frozen=True)
class PartitionTally:
    """Local mode: one ``reports`` partition's tally of one round (support counts ``m x d``,
    report counts per group), sent at wall time ``at``."""

    stream: str
    slot: int
    round: str
    partition: int
    partitions: int
    support: list[int]
    reports: list[int]
    at: float

    def encode(self) -> bytes:
        return _pack(
            {
                "kind": "tally",
                "stream": self.stream,
                "slot": self.slot,
                "round": self.round,
                "partition": self.partition,
                "partitions": self.partitions,
                "support": self.support,
                "reports": self.reports,
                "now": self.at,
            }
        )


Internal = Partial | OpenPartial | Tick | PartitionTally
"""Any message of the internal ``partials`` topic."""


def decode(raw: bytes | None) -> Internal:
    """The typed message of a ``partials`` value; :class:`InternalError` if malformed, whatever
    the bytes (never another exception)."""
    msg = _load(raw, InternalError)
    if not isinstance(msg, dict) or "kind" not in msg:
        raise InternalError("not an internal message: no kind")
    kind = msg["kind"]
    if kind not in ("partial", "open_partial", "tick", "tally"):
        raise InternalError(f"unknown kind {str(kind)[:32]!r}")
    check = _Checker(msg, InternalError, str(kind))
    stream, partitions = check.text("stream"), check.int("partitions", 1, MAX_PARTITIONS)
    if kind == "open_partial":
        return _open_partial(check, stream, partitions)
    if kind == "partial":
        return Partial(
            stream,
            check.int("slot", 0, MAX_SLOT),
            check.int("partition", 0, MAX_PARTITIONS - 1),
            partitions,
            check.counts("counts", whole=False),
        )
    if kind == "tick":
        progress = check.value("progress", dict)
        if len(progress) > MAX_PARTITIONS or not all(
            _is(p, int) and 0 <= p < MAX_PARTITIONS and _finite(t) for p, t in progress.items()
        ):
            raise InternalError("tick progress must map partitions to finite times")
        return Tick(stream, {int(p): float(t) for p, t in progress.items()}, partitions)
    return PartitionTally(
        stream,
        check.int("slot", 0, MAX_SLOT),
        check.text("round"),
        check.int("partition", 0, MAX_PARTITIONS - 1),
        partitions,
        check.counts("support"),
        check.counts("reports"),
        check.time("now"),
    )


def _open_partial(check: _Checker, stream: str, partitions: int) -> OpenPartial:
    keys = check.value("keys", list)
    if len(keys) > MAX_CELLS or not all(
        isinstance(k, str) and 0 < len(k) <= MAX_KEY_CHARS for k in keys
    ):
        raise InternalError(f"open_partial: keys must be 1 to {MAX_KEY_CHARS} character strings")
    if any(a >= b for a, b in zip(keys, keys[1:], strict=False)):
        raise InternalError("open_partial: keys must be sorted and distinct")
    counts = check.counts("counts")
    if (len(counts) % len(keys) if keys else len(counts)) or (keys and not counts):
        raise InternalError("open_partial: counts must be groups x keys")
    chunks = check.int("chunks", 1, MAX_CHUNKS)
    return OpenPartial(
        stream,
        check.int("slot", 0, MAX_SLOT),
        check.int("partition", 0, MAX_PARTITIONS - 1),
        partitions,
        tuple(keys),
        counts,
        check.int("chunk", 0, chunks - 1),
        chunks,
    )


# -- the release agent's records in the slots table ------------------------------------------
@dataclass(frozen=True)
class OpenSlot:
    """A central slot's partials merged so far: the summed counts, the partitions merged, and
    a digest of each partition's counts (to tell a replay from late data)."""

    counts: list[int] | list[float]
    parts: tuple[int, ...] = ()
    digests: dict[str, int] = field(default_factory=dict)

    def merge(self, partition: int, counts: list[Any], digest: int) -> OpenSlot:
        summed = [a + b for a, b in zip(self.counts, counts, strict=True)]
        return OpenSlot(summed, (*self.parts, partition), {**self.digests, str(partition): digest})


@dataclass(frozen=True)
class OpenRound:
    """A local round's tallies merged so far (``of``: the ``reports`` partition count)."""

    slot: int
    round: str
    support: list[int]
    reports: list[int]
    of: int
    parts: tuple[int, ...] = ()

    def merge(self, tally: PartitionTally) -> OpenRound:
        return OpenRound(
            self.slot,
            self.round,
            [a + b for a, b in zip(self.support, tally.support, strict=True)],
            [a + b for a, b in zip(self.reports, tally.reports, strict=True)],
            self.of,
            (*self.parts, tally.partition),
        )


def encode_open_slots(slots: dict[int, OpenSlot]) -> bytes:
    return _pack(
        {
            slot: {"counts": o.counts, "parts": list(o.parts), "digests": o.digests}
            for slot, o in slots.items()
        }
    )


def decode_open_slots(raw: bytes | None, key: str = "") -> dict[int, OpenSlot]:
    """A stream's open slots (``key``: the table key, for the error); :class:`StateError` if
    ``raw`` is not such a record."""
    if raw is None:
        return {}
    found = _load(raw, _state_error("slots", key))
    if not isinstance(found, dict) or len(found) > MAX_CELLS:
        raise StateError("slots", key, "not a map of open slots")
    out = {}
    for slot, o in found.items():
        check = _Checker(o, _state_error("slots", key), "open slot")
        if not _is(slot, int) or not 0 <= slot < MAX_SLOT or not isinstance(o, dict):
            raise StateError("slots", key, "not a map of open slots")
        parts = check.value("parts", list)
        digests = o.get("digests", {})
        if not all(_is(p, int) and 0 <= p < MAX_PARTITIONS for p in parts) or not (
            isinstance(digests, dict)
            and all(isinstance(p, str) and _is(d, int) for p, d in digests.items())
        ):
            raise StateError("slots", key, "open slot parts or digests malformed")
        out[int(slot)] = OpenSlot(check.counts("counts", whole=False), tuple(parts), digests)
    return out


def decode_merged(raw: bytes | None, key: str = "") -> dict[int, dict[str, int]]:
    """The central driver's digests of its last released slots (``slot -> {partition:
    digest}``); :class:`StateError` if ``raw`` is not such a record."""
    if raw is None:
        return {}
    found = _load(raw, _state_error("slots", key))
    ok = isinstance(found, dict) and all(
        _is(slot, int)
        and isinstance(d, dict)
        and all(isinstance(p, str) and _is(v, int) for p, v in d.items())
        for slot, d in found.items()
    )
    if not ok:
        raise StateError("slots", key, "not a map of released slots' digests")
    return {int(slot): d for slot, d in found.items()}


def encode_open_round(cur: OpenRound) -> bytes:
    return _pack(
        {
            "slot": cur.slot,
            "round": cur.round,
            "support": cur.support,
            "reports": cur.reports,
            "parts": list(cur.parts),
            "of": cur.of,
        }
    )


def decode_open_round(raw: bytes | None, key: str = "") -> OpenRound | None:
    """A local stream's open round; :class:`StateError` if ``raw`` is not such a record."""
    if raw is None:
        return None
    check = _Checker(_load(raw, _state_error("slots", key)), _state_error("slots", key), "round")
    parts = check.value("parts", list)
    if not all(_is(p, int) and 0 <= p < MAX_PARTITIONS for p in parts):
        raise StateError("slots", key, "round parts malformed")
    return OpenRound(
        check.int("slot", 0, MAX_SLOT),
        check.text("round"),
        check.counts("support"),
        check.counts("reports"),
        check.int("of", 1, MAX_PARTITIONS),
        tuple(parts),
    )


# -- helpers -----------------------------------------------------------------------------------
def _pack(obj: dict[Any, Any]) -> bytes:
    out: bytes = msgpack.packb(obj, use_single_float=False)
    return out


Refusal = Callable[[str], ValueError]
"""Makes the error of one codec from its message."""


def _state_error(table: str, key: str) -> Refusal:
    return lambda why: StateError(table, key, why)


def _load(raw: bytes | None, error: Refusal) -> Any:
    """``raw`` unpacked, or ``error`` (msgpack raises several unrelated types)."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise error("no value")
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # noqa: BLE001 - any failure of the unpacker is a refusal
        raise error(f"not msgpack: {type(exc).__name__}") from None


def _is(value: Any, kind: type) -> bool:
    """``value`` is of ``kind``: bools are not numbers, ints are floats."""
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _finite(value: Any) -> bool:
    return _is(value, float) and math.isfinite(value)


def _count(value: Any, whole: bool) -> bool:
    """A finite non-negative number up to :data:`MAX_COUNT` (an int if ``whole``)."""
    return _is(value, int if whole else float) and math.isfinite(value) and 0 <= value <= MAX_COUNT


@dataclass(frozen=True)
class _Checker:
    """Reads typed, ranged fields of one decoded map; ``error`` makes the refusal."""

    msg: Any
    error: Refusal
    what: str

    def value(self, key: str, kind: type) -> Any:
        value = self.msg.get(key) if isinstance(self.msg, dict) else None
        if not _is(value, kind):
            raise self.error(f"{self.what}: {key} must be a {kind.__name__}")
        return value

    def text(self, key: str) -> str:
        value: str = self.value(key, str)
        if not 0 < len(value) <= MAX_ID:
            raise self.error(f"{self.what}: {key} must have 1 to {MAX_ID} characters")
        return value

    def int(self, key: str, low: int, high: int) -> int:
        value: int = self.value(key, int)
        if not low <= value <= high:
            raise self.error(f"{self.what}: {key} out of range")
        return value

    def time(self, key: str) -> float:
        value = self.value(key, float)
        if not math.isfinite(value):
            raise self.error(f"{self.what}: {key} must be finite")
        return float(value)

    def counts(self, key: str, whole: bool = True) -> list[Any]:
        """A list of counts: ints (``whole``) or a sum stream's sums, each in range."""
        values: list[Any] = self.value(key, list)
        if len(values) > MAX_CELLS or not all(_count(x, whole) for x in values):
            kind = "integers" if whole else "numbers"
            raise self.error(f"{self.what}: {key} must be finite non-negative {kind} in range")
        return values
