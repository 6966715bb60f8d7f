"""The ``releases`` topic: one :class:`SlotRelease` per released slot of a stream.

Key: the stream id (UTF-8); value: a msgpack map (``docs/wire.md``). A record carries
``schema`` (absent means 1, the layout before the field): :func:`decode` refuses a layout newer
than :data:`VERSION` with :class:`~app.wire.errors.NewerSchemaError`, and a record that breaks
the layout (undecodable, a field missing or of the wrong type, a histogram that is not a list
of finite numbers) with :class:`~app.wire.errors.BadRecordError`.

>>> r = SlotRelease("clicks", 7, 420.0, 480.0, (3.5, -1.0), True, "pba", {"strict": 0.1}, 1, 1)
>>> decode(encode(r)) == r
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.utc import utc
from app.wire.codec import pack, read_map, schema_of
from app.wire.errors import BadRecordError

VERSION = 1
"""The ``releases`` record layout this code writes and the newest it reads."""

FIELDS: dict[str, tuple[type, ...]] = {
    "stream": (str,),
    "slot": (int,),
    "start": (int, float),
    "end": (int, float),
    "histogram": (list,),
    "fresh": (bool,),
    "mechanism": (str,),
    "spent_by_group": (dict,),
    "version": (int,),
}
"""The required fields and the Python types msgpack gives them."""

GUARANTEE_KEYS = frozenset({"eps", "w", "relation", "noise"})
"""What a ``guarantee`` map holds at least."""


@dataclass(frozen=True, slots=True)
class SlotRelease:
    """One released slot of one stream, as published (all fields public)."""

    stream: str
    slot: int
    start: float
    end: float
    histogram: tuple[float, ...]
    fresh: bool
    mechanism: str
    spent_by_group: dict[str, float]
    version: int
    schema: int
    released_at: float | None = None
    """When the release was computed (None in records written before the field)."""
    delayed: bool = False
    """Held back and released at a later slot's close (a period mechanism's earlier slots)."""
    guarantee: dict[str, Any] | None = None
    """The privacy this release carries (``topics/releases.yaml``); None in records written
    before the field."""

    @property
    def start_utc(self) -> str:
        """Slot start as ``YYYY-MM-DD HH:MM:SSZ``."""
        return utc(self.start)

    @property
    def end_utc(self) -> str:
        """Slot end (exclusive) as ``YYYY-MM-DD HH:MM:SSZ``."""
        return utc(self.end)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready map: the record's fields plus the slot's times in UTC."""
        return {
            "stream": self.stream,
            "slot": self.slot,
            "start": self.start,
            "end": self.end,
            "start_utc": self.start_utc,
            "end_utc": self.end_utc,
            "histogram": list(self.histogram),
            "fresh": self.fresh,
            "mechanism": self.mechanism,
            "spent_by_group": dict(self.spent_by_group),
            "version": self.version,
            "schema": self.schema,
            "released_at": self.released_at,
            "delayed": self.delayed,
            "guarantee": self.guarantee,
        }


def encode(release: SlotRelease) -> bytes:
    """The bytes of one ``releases`` value (fields in the documented order)."""
    fields: dict[str, Any] = {
        "stream": release.stream,
        "slot": release.slot,
        "start": release.start,
        "end": release.end,
        "histogram": [float(x) for x in release.histogram],
        "fresh": release.fresh,
        "mechanism": release.mechanism,
        "spent_by_group": dict(release.spent_by_group),
        "version": release.version,
        "schema": release.schema,
    }
    if release.released_at is not None:
        fields["released_at"] = release.released_at
    fields["delayed"] = release.delayed
    if release.guarantee is not None:
        fields["guarantee"] = release.guarantee
    return pack(fields)


def decode(raw: bytes | None) -> SlotRelease:
    """Check and decode one ``releases`` value (see the module doc for what is refused)."""
    value = read_map(raw, "release")
    schema = schema_of(value, VERSION, "release")
    for name, types in FIELDS.items():
        if name not in value:
            raise BadRecordError(f"missing field {name!r}")
        got = value[name]
        if not isinstance(got, types) or (isinstance(got, bool) and bool not in types):
            raise BadRecordError(f"field {name!r} has type {type(got).__name__}")
    histogram = value["histogram"]
    if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in histogram):
        raise BadRecordError("histogram holds a value that is not a number")
    if not all(math.isfinite(x) for x in histogram):
        raise BadRecordError("histogram holds a value that is not finite")
    return SlotRelease(
        stream=value["stream"],
        slot=value["slot"],
        start=float(value["start"]),
        end=float(value["end"]),
        histogram=tuple(float(x) for x in histogram),
        fresh=value["fresh"],
        mechanism=value["mechanism"],
        spent_by_group={str(k): float(v) for k, v in value["spent_by_group"].items()},
        version=value["version"],
        schema=schema,
        released_at=_optional_time(value.get("released_at")),
        delayed=value.get("delayed") is True,
        guarantee=_optional_guarantee(value.get("guarantee")),
    )


def _optional_guarantee(raw: Any) -> dict[str, Any] | None:
    """``guarantee`` if it is a map with ``eps``, ``w``, ``relation`` and ``noise``; None when
    absent (a record written before the field)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or not GUARANTEE_KEYS <= set(raw):
        raise BadRecordError(f"field 'guarantee' is not a guarantee map: {raw!r}"[:200])
    return {str(k): v for k, v in raw.items()}


def _optional_time(raw: Any) -> float | None:
    """``released_at`` if it is a finite number; None when absent."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise BadRecordError(f"field 'released_at' is not a finite number: {raw!r}")
    return float(raw)
