"""The ``audit`` topic: the budget accounting of every released slot (public: post-processing
of released decisions).

Key: the stream id (UTF-8); value: a msgpack map (:class:`AuditRecord`); readers ignore the
fields they do not know.

>>> a = AuditRecord("s", 3, "pba", "rule", "replace", None, "geometric", "", "publish", True,
...     1.5, False, None, None, {"g": 0.1}, {"g": 0.0}, {"g": 0.1}, {"g": 0.2}, {"g": "1/5"},
...     {"g": 1.0}, {"g": 4}, users_dc=10, users_pub=7, spent_exact_by_group={"g": "1/10"})
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
    (graph streams), ``users_dc``/``users_pub`` (local streams: users asked per round),
    ``spent_exact_by_group`` (exact ledgers) and the delta fields (open-domain streams, whose
    levels are (eps, delta)-DP over their windows) are left out of the bytes when None. No
    field is a figure of the data: budgets follow from the configuration and released
    decisions."""

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
    users_dc: int | None = None
    users_pub: int | None = None
    spent_exact_by_group: dict[str, str] | None = None
    delta_by_group: dict[str, float] | None = None
    delta_spent_by_group: dict[str, float] | None = None
    delta_spent_exact_by_group: dict[str, str] | None = None
    window_delta_spent_by_group: dict[str, float] | None = None
    window_delta_spent_exact_by_group: dict[str, str] | None = None


DELTA_FIELDS = (
    "delta_by_group",
    "delta_spent_by_group",
    "delta_spent_exact_by_group",
    "window_delta_spent_by_group",
    "window_delta_spent_exact_by_group",
)
"""An open-domain stream's delta accounting, beside the eps fields (absent otherwise)."""
_OPTIONAL = ("spatial_n", "users_dc", "users_pub", "spent_exact_by_group", *DELTA_FIELDS)
_NAMES = tuple(f.name for f in fields(AuditRecord))


def encode(record: AuditRecord) -> bytes:
    """The bytes of one ``audit`` value (the fields in order, optional ones when set)."""
    out: dict[str, Any] = {}
    for name in _NAMES:
        value = getattr(record, name)
        if value is not None or name not in _OPTIONAL:
            out[name] = value
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
    known: dict[str, Any] = {n: value.get(n) for n in _NAMES}
    return AuditRecord(**known)
