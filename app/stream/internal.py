"""The internal wire: what the collect stages tell the release agent, typed, one codec each.

Three frozen types travel on the internal ``partials`` topic (key: the stream id, so one
stream's messages stay in order on one partition), each with ``encode()`` and one
:func:`decode` for all:

* :class:`Partial`: one ``events`` partition's counts (``groups x d``, row-major; a sum
  stream's sums) for one slot it closed;
* :class:`Tick`: per partition the sender owns, the event time it is complete up to (local
  streams send empty ticks: the agent's clock);
* :class:`PartitionTally`: one ``reports`` partition's support counts and report counts of one
  round.

:func:`decode` checks every field's type, so a malformed message (a fault, or something else
writing to the topic) is an :class:`InternalError` the release agent refuses, never a
``KeyError`` inside it. What a well-formed message may claim (its partitions, its time) is the
guard's business (:mod:`app.stream.release.guard`).

The release agent's own records in the ``slots`` table are typed here too: :class:`OpenSlot`
(a central slot's merged partials) and :class:`OpenRound` (a local round's merged tallies),
each map ``slot -> record`` with one codec (:func:`encode_open_slots`,
:func:`decode_open_slots`, :func:`encode_open_round`, :func:`decode_open_round`). The bytes are
those of earlier releases (same msgpack keys), so a running deployment upgrades in place.

>>> p = Partial("s", 12, 1, 4, [1, 0, 2])
>>> decode(p.encode()) == p
True
>>> decode(Tick("s", {3: 120.0}, 4).encode())
Tick(stream='s', progress={3: 120.0}, partitions=4)
>>> decode(b"\\x80")
Traceback (most recent call last):
...
app.stream.internal.InternalError: not an internal message: no kind
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack


class InternalError(ValueError):
    """A ``partials`` value that is not a well-formed internal message."""


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


Internal = Partial | Tick | PartitionTally
"""Any message of the internal ``partials`` topic."""


def decode(raw: bytes | None) -> Internal:
    """The typed message of a ``partials`` value; :class:`InternalError` if malformed."""
    try:
        msg = msgpack.unpackb(raw, raw=False, strict_map_key=False) if raw is not None else None
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise InternalError(f"not msgpack: {type(exc).__name__}") from None
    if not isinstance(msg, dict) or "kind" not in msg:
        raise InternalError("not an internal message: no kind")
    kind = msg["kind"]
    stream, partitions = _get(msg, "stream", str), _get(msg, "partitions", int)
    if kind == "partial":
        return Partial(
            stream,
            _get(msg, "slot", int),
            _get(msg, "partition", int),
            partitions,
            _numbers(msg, "counts"),
        )
    if kind == "tick":
        progress = _get(msg, "progress", dict)
        if not all(_is(p, int) and _is(t, float) for p, t in progress.items()):
            raise InternalError("tick progress must map partitions to times")
        return Tick(stream, {int(p): float(t) for p, t in progress.items()}, partitions)
    if kind == "tally":
        return PartitionTally(
            stream,
            _get(msg, "slot", int),
            _get(msg, "round", str),
            _get(msg, "partition", int),
            partitions,
            _ints(msg, "support"),
            _ints(msg, "reports"),
            float(_get(msg, "now", float)),
        )
    raise InternalError(f"unknown kind {str(kind)[:32]!r}")


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


def decode_open_slots(raw: bytes | None) -> dict[int, OpenSlot]:
    found = _unpack(raw)
    return {
        int(slot): OpenSlot(o["counts"], tuple(o["parts"]), dict(o.get("digests", {})))
        for slot, o in found.items()
    }


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


def decode_open_round(raw: bytes | None) -> OpenRound | None:
    if raw is None:
        return None
    o = _unpack(raw)
    return OpenRound(
        int(o["slot"]),
        str(o["round"]),
        list(o["support"]),
        list(o["reports"]),
        int(o["of"]),
        tuple(o["parts"]),
    )


# -- helpers -----------------------------------------------------------------------------------
def _pack(obj: dict[Any, Any]) -> bytes:
    out: bytes = msgpack.packb(obj, use_single_float=False)
    return out


def _unpack(raw: bytes | None) -> dict[Any, Any]:
    if raw is None:
        return {}
    out: dict[Any, Any] = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    return out


def _is(value: Any, kind: type) -> bool:
    """``value`` is of ``kind``: bools are not numbers, ints are floats."""
    if isinstance(value, bool):
        return False
    if kind is float:
        return isinstance(value, int | float)
    return isinstance(value, kind)


def _get(msg: dict[str, Any], key: str, kind: type) -> Any:
    value = msg.get(key)
    if not _is(value, kind):
        raise InternalError(f"{msg.get('kind')}: {key} must be a {kind.__name__}")
    return value


def _numbers(msg: dict[str, Any], key: str) -> list[Any]:
    values = _get(msg, key, list)
    if not all(_is(x, float) for x in values):
        raise InternalError(f"{msg.get('kind')}: {key} must be numbers")
    return values  # type: ignore[no-any-return]


def _ints(msg: dict[str, Any], key: str) -> list[int]:
    values = _get(msg, key, list)
    if not all(_is(x, int) for x in values):
        raise InternalError(f"{msg.get('kind')}: {key} must be integers")
    return values  # type: ignore[no-any-return]
