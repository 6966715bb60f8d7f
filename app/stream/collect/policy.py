"""What happens to bad input: the policy function the ingest service calls for each one.

A policy gets the exception, the record (anything with ``topic``, ``partition``, ``offset``,
``key`` and ``value``) and a logger. :func:`dead_letter_policy` builds the default one: route the
record to ``dead-letter`` with its reason, count it in ``dpstream_dead_letters`` (and, with the
operator's opt-in, ``dpstream_events{outcome="invalid"}``), and log where it came from, at most
one line per reason every :data:`LOG_EVERY_S` seconds with the count of lines suppressed. The
worker then goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from app import metrics
from app.stream.errors import BadEvent
from app.stream.records import MAX_DEAD_LETTER_KEY_BYTES, encode_dead_letter


class Policy(Protocol):
    def __call__(self, exc: BadEvent, record: Any, logger: logging.Logger) -> None: ...


LOG_EVERY_S = 10.0
"""Bad input is logged at most once per reason in this many seconds."""


class Throttle:
    """Whether to log now, per key, and how many lines were held back since the last one."""

    def __init__(self, every_s: float = LOG_EVERY_S, clock: Callable[[], float] = time.monotonic):
        self.every_s, self.clock = every_s, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def __call__(self, key: str) -> int | None:
        """None: hold this line back; else the number of lines held back before it."""
        now = self.clock()
        if now - self._last.get(key, -self.every_s) < self.every_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


def dead_letter_policy(
    send: Callable[[bytes | None, bytes], None], outcomes: Any = metrics.EVENTS
) -> Policy:
    """The default policy; ``send(key, value)`` queues a record on the dead-letter topic.

    ``outcomes`` is the counter whose ``("", "invalid")`` sample counts the record:
    ``dpstream_events`` for events, ``dpstream_reports`` for local-mode reports.
    """

    throttle = Throttle()

    def policy(exc: BadEvent, record: Any, logger: logging.Logger) -> None:
        key = record.key
        send(
            key[:MAX_DEAD_LETTER_KEY_BYTES] if key is not None else None,
            encode_dead_letter(
                exc.reason, exc.detail, record.topic, record.partition, record.offset, record.value
            ),
        )
        metrics.DEAD_LETTERS.labels(exc.reason).inc()
        outcomes.labels("", "invalid").inc()
        held = throttle(exc.reason)
        if held is None:
            return
        # The detail never carries a user's value, only what was wrong with the message.
        logger.warning(
            "dead-letter reason=%s topic=%s partition=%d offset=%d detail=%r suppressed=%d",
            exc.reason,
            record.topic,
            record.partition,
            record.offset,
            exc.detail,
            held,
        )

    return policy
