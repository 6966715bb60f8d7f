"""The ``releases`` topic: one :class:`SlotRelease` per released slot of a stream.

Key: the stream id (UTF-8); value: a msgpack map (``docs/wire.md``). A record carries
``schema`` (absent means 1, the layout before the field): :func:`decode` refuses a layout newer
than :data:`VERSION` with :class:`~app.wire.errors.NewerSchemaError`, and a record that breaks
the layout (undecodable, a field missing or of the wrong type, a histogram that is not a list
of finite numbers, an open stream's keys that do not fit its histogram) with
:class:`~app.wire.errors.BadRecordError`.

Two layouts share the topic. A labels stream writes layout 1 (:data:`LABELS_SCHEMA`, its bytes
as before): ``histogram`` in label order. An open-domain stream (``domain: open``) writes layout
2 (:data:`OPEN_SCHEMA`): a key -> count map, ``keys[i] -> histogram[i]``, with the keys sorted
by code point (never by count), the keys selected at this slot (``new_keys``), the public
keys' ``status``, the selection ``threshold``, the ``retired`` keys and the exact eps and delta
spent per level. A reader of layout 1 refuses it rather than read an open stream's counts as a
label-order histogram.

>>> r = SlotRelease("clicks", 7, 420.0, 480.0, (3.5, -1.0), True, "pba", {"strict": 0.1}, 1, 1)
>>> decode(encode(r)) == r
True
>>> o = SlotRelease("urls", 7, 420.0, 480.0, (41.0, 17.0), True, "open_uniform", {"s": 0.5},
...     1, 2, keys=("/a", "/b"), new_keys=("/b",), status="publish", threshold=12,
...     retired=(), spent_exact_by_group={"s": "1/2"}, delta_spent_by_group={"s": 1e-6},
...     delta_spent_exact_by_group={"s": "1/1000000"})
>>> decode(encode(o)) == o, o.key_counts()
(True, {'/a': 41.0, '/b': 17.0})
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.utc import utc
from app.wire.codec import pack, read_map, schema_of
from app.wire.errors import BadRecordError

VERSION = 2
"""The newest ``releases`` record layout this code writes and reads."""
LABELS_SCHEMA = 1
"""The layout of a labels stream's records (unchanged since version 1)."""
OPEN_SCHEMA = 2
"""The layout of an open-domain stream's records: layout 1 plus the key -> count fields."""

OPEN_FIELDS: dict[str, tuple[type, ...]] = {
    "keys": (list,),
    "new_keys": (list,),
    "status": (str,),
    "threshold": (int,),
    "retired": (list,),
    "spent_exact_by_group": (dict,),
    "delta_spent_by_group": (dict,),
    "delta_spent_exact_by_group": (dict,),
}
"""The fields every layout-2 record (an open stream's) carries, after layout 1's, in order."""

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
    keys: tuple[str, ...] | None = None
    """Open streams: the released keys, sorted; ``histogram[i]`` is the count of ``keys[i]``.
    None for a labels stream (the rest of the open fields are None too)."""
    new_keys: tuple[str, ...] | None = None
    """Open streams: the keys selected at this slot (sorted, among ``keys``); the others were
    public before it."""
    status: str | None = None
    """Open streams: publish | skip | nullified, for the public keys' counts."""
    threshold: int | None = None
    """Open streams: the selection threshold tau of the slot."""
    retired: tuple[str, ...] | None = None
    """Open streams: public keys retired after this slot (not released from the next one)."""
    spent_exact_by_group: dict[str, str] | None = None
    """Open streams: eps spent in this slot per level, exact (``"p/q"``)."""
    delta_spent_by_group: dict[str, float] | None = None
    """Open streams: delta spent in this slot per level."""
    delta_spent_exact_by_group: dict[str, str] | None = None
    """Open streams: the same, exact (``"p/q"``)."""

    @property
    def is_open(self) -> bool:
        """Whether this is an open stream's record (a key -> count map)."""
        return self.keys is not None

    def key_counts(self) -> dict[str, float]:
        """An open stream's release as a key -> count map (sorted by key); a labels stream's
        is empty (its histogram is in label order: the stream's config names the labels)."""
        if self.keys is None:
            return {}
        return dict(zip(self.keys, self.histogram, strict=True))

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
            **{name: _plain(getattr(self, name)) for name in OPEN_FIELDS if self.is_open},
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
    if release.is_open:
        for name in OPEN_FIELDS:
            fields[name] = _plain(getattr(release, name))
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
    opened = _open_fields(value, len(histogram)) if schema >= OPEN_SCHEMA else {}
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
        **opened,
    )


def _plain(value: Any) -> Any:
    """A field's value as msgpack writes it (tuples as lists)."""
    return list(value) if isinstance(value, tuple) else value


def _open_fields(value: dict[str, Any], size: int) -> dict[str, Any]:
    """The open-stream fields of a layout-2 record, checked (all of them are required)."""
    for name, types in OPEN_FIELDS.items():
        got = value.get(name)
        if not isinstance(got, types) or isinstance(got, bool):
            raise BadRecordError(f"open release: field {name!r} missing or mistyped")
    keys, new, retired = value["keys"], value["new_keys"], value["retired"]
    if not all(isinstance(k, str) for k in (*keys, *new, *retired)):
        raise BadRecordError("open release: keys must be strings")
    if len(keys) != size:
        raise BadRecordError(f"open release: {len(keys)} keys for {size} counts")
    if any(a >= b for a, b in zip(keys, keys[1:], strict=False)) or not set(new) <= set(keys):
        raise BadRecordError("open release: keys must be sorted and distinct, new_keys among them")
    exact = ("spent_exact_by_group", "delta_spent_exact_by_group")
    if not all(isinstance(v, str) for n in exact for v in value[n].values()) or not all(
        isinstance(v, int | float) and not isinstance(v, bool)
        for v in value["delta_spent_by_group"].values()
    ):
        raise BadRecordError("open release: spending maps malformed")
    return {
        "keys": tuple(keys),
        "new_keys": tuple(new),
        "status": value["status"],
        "threshold": value["threshold"],
        "retired": tuple(retired),
        "spent_exact_by_group": {str(k): v for k, v in value["spent_exact_by_group"].items()},
        "delta_spent_by_group": {
            str(k): float(v) for k, v in value["delta_spent_by_group"].items()
        },
        "delta_spent_exact_by_group": {
            str(k): v for k, v in value["delta_spent_exact_by_group"].items()
        },
    }


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
