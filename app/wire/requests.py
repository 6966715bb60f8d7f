"""The ``collection-requests`` topic (local mode): what the service asks devices per round.

Key: the stream id (UTF-8); value: a msgpack map, the envelope :class:`RequestRecord` around the
stream-independent :class:`~app.dp.local.wire.CollectionRequest` (its ``to_dict`` map, under
``request``). Readers take the envelope through :func:`decode` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.dp.local.wire import CollectionRequest
from app.wire.codec import pack, read_map, schema_of
from app.wire.errors import BadRecordError

VERSION = 1
"""The envelope layout this code writes (no ``schema`` field: absent means 1) and the newest
it reads."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One ``collection-requests`` value: the mechanism's ``request`` for the stream's ``slot``
    (``start``/``end``: the slot's wall-clock span; None when a value does not state it, and
    a device then refuses it), counted until ``deadline`` (Unix seconds), over ``users``
    registered users."""

    stream: str
    slot: int
    start: float | None
    end: float | None
    deadline: float
    users: int
    request: CollectionRequest


def encode(record: RequestRecord) -> bytes:
    """The bytes of one ``collection-requests`` value."""
    return pack(
        {
            "stream": record.stream,
            "slot": record.slot,
            "start": record.start,
            "end": record.end,
            "deadline": record.deadline,
            "users": record.users,
            "request": record.request.to_dict(),
        }
    )


def decode(raw: bytes | None) -> RequestRecord:
    """The envelope and request of one value; :class:`~app.wire.errors.BadRecordError` for one
    that breaks the layout (the request's own checks:
    :meth:`~app.dp.local.wire.CollectionRequest.from_dict`)."""
    fields = read_map(raw, "collection request")
    schema_of(fields, VERSION, "collection request")
    try:
        stream, request = fields["stream"], fields["request"]
        if type(stream) is not str or type(request) is not dict:
            raise TypeError("stream must be a str and request a map")
        return RequestRecord(
            stream,
            _int(fields["slot"]),
            _time(fields.get("start")),
            _time(fields.get("end")),
            float(fields["deadline"]),
            _int(fields["users"]),
            CollectionRequest.from_dict(request),
        )
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise BadRecordError(f"collection request: {type(exc).__name__}: {exc}"[:300]) from None


def _time(x: Any) -> float | None:
    return float(x) if type(x) is float or type(x) is int else None


def _int(x: Any) -> int:
    if type(x) is not int:
        raise TypeError(f"expected an int, got {type(x).__name__}")
    return x
