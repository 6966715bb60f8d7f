"""The ``preferences`` topic: each user's chosen requirement level (compacted by user).

Key: the user id (UTF-8, as in ``events``); value: a msgpack map ``{"level": name}``, or null
(a tombstone). A tombstone and a value that is not such a map both mean the stream's default
level (through the exclusion gap), so :func:`decode` never refuses.

>>> encode(Preference("open"))
b'\\x81\\xa5level\\xa4open'
>>> decode(encode(Preference("open"))), decode(None), decode(b"junk")
(Preference(level='open'), Preference(level=None), Preference(level=None))
"""

from __future__ import annotations

from dataclasses import dataclass

from app.wire.codec import pack, unpack

VERSION = 1
"""The ``preferences`` layout (no ``schema`` field: a record of another layout means the
default level, the safe reading)."""


@dataclass(frozen=True, slots=True)
class Preference:
    """A user's level name; None: the stream's default level."""

    level: str | None


def encode(pref: Preference) -> bytes | None:
    """The value of ``pref`` (None, a tombstone, for the default level)."""
    return None if pref.level is None else pack({"level": pref.level})


def decode(raw: bytes | None) -> Preference:
    """The preference a value states (a tombstone or a bad value: the default level)."""
    if raw is None:
        return _DEFAULT
    try:
        level = unpack(raw)["level"]
    except Exception:  # noqa: BLE001 - a bad preference means the default level
        return _DEFAULT
    return Preference(level) if type(level) is str else _DEFAULT


_DEFAULT = Preference(None)
