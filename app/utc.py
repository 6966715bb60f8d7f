"""The one way every dpstream output writes a time: ISO 8601 in UTC, to the second.

``YYYY-MM-DDTHH:MM:SSZ`` (``2026-11-23T12:17:32Z``) in full (JSON fields ``*_utc``, the
budget view, ``ledger show``, ``releases tail --wide``, the status page's header); where a
line has room only for the time of day, the same text from ``T`` on, without the ``T``
(``12:17:32Z``: :func:`utc_time`). Nothing prints local time. The README's "Output formats"
section states this decision.

It imports nothing from ``app``, so the service, the device SDK, the tools and the bench can
all use it.

>>> utc(0), utc(1795436252.9), utc_time(1795436252.9)
('1970-01-01T00:00:00Z', '2026-11-23T12:17:32Z', '12:17:32Z')
"""

from __future__ import annotations

import logging
import time

__all__ = ["UTC_FORMAT", "UTCFormatter", "utc", "utc_time"]

UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""The ``strftime`` format of :func:`utc` (ISO 8601, UTC, whole seconds)."""


def utc(ts: float) -> str:
    """Unix seconds as ``YYYY-MM-DDTHH:MM:SSZ`` (fractions of a second are dropped)."""
    return time.strftime(UTC_FORMAT, time.gmtime(float(ts)))


def utc_time(ts: float) -> str:
    """The time of day of :func:`utc`: ``HH:MM:SSZ`` (for compact lines and chart labels)."""
    return utc(ts)[11:]


class UTCFormatter(logging.Formatter):
    """A log formatter whose ``%(asctime)s`` is :func:`utc` (not local time, no milliseconds).

    >>> record = logging.makeLogRecord({"msg": "hi", "created": 0.0})
    >>> UTCFormatter("%(asctime)s %(message)s").format(record)
    '1970-01-01T00:00:00Z hi'
    """

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return utc(record.created)
