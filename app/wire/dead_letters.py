"""The ``dead-letter`` topic: each refused input record, why, and where it came from.

Key: the refused record's key (cut to :data:`MAX_KEY_BYTES`); value: a msgpack map. A large
refused value is kept cut, with its whole size and sha256, so a dead letter always fits the
producer's request size.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from app.wire.codec import pack

VERSION = 1
"""The ``dead-letter`` layout (no ``schema`` field)."""
MAX_VALUE_BYTES = 64 << 10
"""Refused values larger than this are kept cut, with their size and sha256."""
TOO_LARGE_KEEP_BYTES = 1 << 10
"""What a ``too_large`` dead letter keeps of the value (with its size and sha256): every
refused record queued for the dead-letter topic is thus bounded by a few KB."""
MAX_KEY_BYTES = 1 << 10
"""A refused record's key is kept up to this many bytes."""
MAX_DETAIL = 512
"""The longest ``detail`` kept."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One refused record: ``reason`` (:data:`~app.wire.errors.REASONS`), a ``detail`` for a
    person, and the source ``topic``, ``partition``, ``offset`` and ``value``."""

    reason: str
    detail: str
    topic: str
    partition: int
    offset: int
    value: bytes | None


def encode(letter: DeadLetter) -> bytes:
    """The bytes of one ``dead-letter`` value; a value over the limit is cut (see the module)."""
    value = letter.value
    out: dict[str, Any] = {
        "reason": letter.reason,
        "detail": letter.detail[:MAX_DETAIL],
        "topic": letter.topic,
        "partition": letter.partition,
        "offset": letter.offset,
        "value": value,
    }
    keep = TOO_LARGE_KEEP_BYTES if letter.reason == "too_large" else MAX_VALUE_BYTES
    if value is not None and len(value) > keep:
        out.update(
            value=value[:keep],
            truncated=True,
            size=len(value),
            sha256=hashlib.sha256(value).hexdigest(),
        )
    return pack(out)
