"""What happens to bad input: the policy function the ingest service calls for each one.

A policy gets the exception, the record (anything with ``topic``, ``partition``, ``offset``,
``key`` and ``value``) and a logger. :func:`dead_letter_policy` builds the default one: route the
record to ``dead-letter`` with its reason, count it in ``dpstream_dead_letters`` and
``dpstream_events{outcome="invalid"}``, and log where it came from. The worker then goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from app import metrics
from app.stream.errors import BadEvent
from app.stream.records import encode_dead_letter


class Policy(Protocol):
    def __call__(self, exc: BadEvent, record: Any, logger: logging.Logger) -> None: ...


def dead_letter_policy(
    send: Callable[[bytes | None, bytes], None], outcomes: Any = metrics.EVENTS
) -> Policy:
    """The default policy; ``send(key, value)`` queues a record on the dead-letter topic.

    ``outcomes`` is the counter whose ``("", "invalid")`` sample counts the record:
    ``dpstream_events`` for events, ``dpstream_reports`` for local-mode reports.
    """

    def policy(exc: BadEvent, record: Any, logger: logging.Logger) -> None:
        send(
            record.key,
            encode_dead_letter(
                exc.reason, exc.detail, record.topic, record.partition, record.offset, record.value
            ),
        )
        metrics.DEAD_LETTERS.labels(exc.reason).inc()
        outcomes.labels("", "invalid").inc()
        # The detail never carries a user's value, only what was wrong with the message.
        logger.warning(
            "dead-letter reason=%s topic=%s partition=%d offset=%d detail=%r",
            exc.reason, record.topic, record.partition, record.offset, exc.detail,
        )

    return policy
