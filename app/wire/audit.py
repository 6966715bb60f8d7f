"""The ``audit`` topic: the budget accounting of every released slot (public: post-processing
of released decisions).

Key: the stream id (UTF-8); value: a msgpack map (:class:`AuditRecord`). A mechanism may add
fields of its own (:attr:`AuditRecord.extra`, written after the common ones); readers ignore
the fields they do not know.

>>> a = AuditRecord("s", 3, "pba", "rule", "replace", None, "geometric", "", "publish", True,
...     1.5, False, None, None, {"g": 0.1}, {"g": 0.0}, {"g": 0.1}, {"g": 0.2}, {"g": "1/5"},
...     {"g": 1.0}, {"g": 4}, {"dissimilarity": 0.5}, {"g": "1/10"})
>>> decode(encode(a)) == a
True
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from app.wire.codec import pack, read_map, schema_of
from app.wire.errors import BadRecordError

VERSION = 1
"""The ``audit`` layout (no ``schema`` field: absent means 1) and the newest read."""


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One released slot's accounting (``docs/wire.md`` names each field). ``spatial_n``
    (graph streams) and ``spent_exact_by_group`` (exact ledgers) are left out of the bytes
    when None; ``extra`` holds the mechanism's own fields."""

    stream: str
    slot: int
    mechanism: str
    describe: str
    neighbours: str
    spatial_n: int | None
    noise: str
    deployment: str
    status: str
    fresh: bool
    released_at: float
    delayed: bool
    weaker_guarantee: str | None
    privacy_unit: dict[str, Any] | None
    spent_by_group: dict[str, float]
    spent_dc_by_group: dict[str, float]
    spent_pub_by_group: dict[str, float]
    window_spent_by_group: dict[str, float]
    window_spent_exact_by_group: dict[str, str]
    eps_by_group: dict[str, float]
    w_by_group: dict[str, int]
    extra: dict[str, Any]
    spent_exact_by_group: dict[str, str] | None = None


_OPTIONAL = ("spatial_n", "spent_exact_by_group")
_NAMES = tuple(f.name for f in fields(AuditRecord) if f.name != "extra")


def encode(record: AuditRecord) -> bytes:
    """The bytes of one ``audit`` value (the common fields in order, then ``extra``, then
    ``spent_exact_by_group``)."""
    out: dict[str, Any] = {}
    for name in _NAMES[:-1]:
        value = getattr(record, name)
        if value is not None or name not in _OPTIONAL:
            out[name] = value
    out.update(record.extra)
    if record.spent_exact_by_group is not None:
        out["spent_exact_by_group"] = record.spent_exact_by_group
    return pack(out)


def decode(raw: bytes | None) -> AuditRecord:
    """One ``audit`` value; :class:`~app.wire.errors.BadRecordError` when a common field is
    missing or the map is not one."""
    value = read_map(raw, "audit")
    schema_of(value, VERSION, "audit")
    missing = [n for n in _NAMES if n not in value and n not in _OPTIONAL]
    if missing:
        raise BadRecordError(f"audit: missing field {missing[0]!r}")
    if type(value["stream"]) is not str or type(value["slot"]) is not int:
        raise BadRecordError("audit: stream must be a str and slot an int")
    extra = {k: v for k, v in value.items() if k not in _NAMES}
    known: dict[str, Any] = {n: value.get(n) for n in _NAMES}
    return AuditRecord(**known, extra=extra)
