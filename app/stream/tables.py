"""The release agent's tables as the worker keeps them: ``str -> bytes`` on Faust tables whose
changelog topics are inputs like any other.

Faust restores a table by copying its changelog records into RocksDB as they are, and decodes a
value only when it is read: one record that is not the table's (no key, a key or value that
does not decode, a value that is not base64) would stop the restore, or the release agent at
its first read, on every restart. :class:`ChangelogTable` refuses such a record while restoring
(counted in ``dpstream_internal_refused_total{reason="changelog"}`` and logged, never its
value) and :class:`BytesTable` turns any value that still does not decode into a
:class:`~app.stream.internal.StateError` the agent handles (:mod:`app.stream.release`).
"""

from __future__ import annotations

import base64
import binascii
import logging
from collections.abc import Iterable, Iterator, MutableMapping
from typing import Any

import faust

from app import metrics
from app.stream.internal import StateError

log = logging.getLogger(__name__)


class BytesTable(MutableMapping[str, bytes]):
    """A Faust table of ``str -> bytes`` stored as base64 text (Faust's JSON codec needs text)."""

    def __init__(self, table: Any, name: str = "") -> None:
        self.table = table
        self.name = name or str(getattr(table, "name", ""))

    def __getitem__(self, key: str) -> bytes:
        try:
            value = self.table[key]
        except KeyError:
            raise
        except Exception as exc:  # noqa: BLE001 - Faust's codecs raise several types
            raise StateError(self.name, key, f"does not decode ({type(exc).__name__})") from None
        if value is None:
            raise KeyError(key)
        decoded = _base64(value)
        if decoded is None:
            raise StateError(self.name, key, "not base64 text")
        return decoded

    def __setitem__(self, key: str, value: bytes) -> None:
        self.table[key] = base64.b64encode(value).decode()

    def __delitem__(self, key: str) -> None:
        del self.table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


def _base64(value: Any) -> bytes | None:
    """``value`` as base64 text decoded, or None if it is not."""
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


class ChangelogTable(faust.Table):  # type: ignore[type-arg]
    """A Faust table that restores only the changelog records it could have written."""

    def apply_changelog_batch(self, batch: Iterable[Any]) -> None:
        super().apply_changelog_batch([e for e in batch if self._fits(e.message)])

    def _fits(self, message: Any) -> bool:
        """Whether a changelog record is a ``str -> base64 text`` (or a tombstone) record."""
        store: Any = self.data
        why = ""
        try:
            if not isinstance(message.key, bytes) or not isinstance(
                store._decode_key(message.key), str
            ):
                why = "key"
            elif message.value is not None and (
                not isinstance(message.value, bytes)
                or _base64(store._decode_value(message.value)) is None
            ):
                why = "value"
        except Exception:  # noqa: BLE001 - Faust's codecs raise several types
            why = "undecodable"
        if why:
            metrics.INTERNAL_REFUSED.labels(self.name, "changelog").inc()
            log.error(
                "changelog record refused table=%s partition=%s offset=%s why=%s",
                self.name,
                getattr(message, "partition", None),
                getattr(message, "offset", None),
                why,
            )
        return not why
