"""The msgpack options of every public record, and the ``schema`` rule they share.

Every public value is one msgpack map (strings as ``str``, bytes as ``bin``, floats as float64).
A map may carry ``schema``, its layout version (absent: 1); a reader refuses a version newer
than its codec's ``VERSION`` (:class:`~app.wire.errors.NewerSchemaError`).
"""

from __future__ import annotations

from typing import Any

import msgpack

from app.wire.errors import BadRecordError, NewerSchemaError


def pack(fields: dict[str, Any]) -> bytes:
    """One public record's bytes (msgpack, floats as float64)."""
    out: bytes = msgpack.packb(fields, use_single_float=False)
    return out


def unpack(raw: bytes) -> Any:
    """Whatever msgpack value ``raw`` holds (any exception msgpack raises passes through)."""
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def read_map(raw: bytes | None, what: str) -> dict[str, Any]:
    """The map of a record the service wrote; :class:`BadRecordError` if ``raw`` is not one."""
    try:
        value = unpack(raw or b"")
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated types
        raise BadRecordError(f"{what}: not msgpack ({type(exc).__name__}: {exc})") from None
    if type(value) is not dict:
        raise BadRecordError(f"{what}: not a map but {type(value).__name__}")
    return value


def schema_of(fields: dict[str, Any], version: int, what: str) -> int:
    """The record's ``schema`` (absent: 1), refused when it is not an int >= 1 or is newer than
    ``version``."""
    schema = fields.get("schema", 1)
    if type(schema) is not int or schema < 1:
        raise BadRecordError(f"{what}: schema must be an int >= 1, got {schema!r}"[:200])
    if schema > version:
        raise NewerSchemaError(
            f"{what} record schema {schema} is newer than this reader's {version}: "
            "upgrade dpstream to read it"
        )
    return schema
