"""An event as the tests compare it: ``(stream, user, ts, value)``, ``value`` being
``(index, amount)`` for a sum stream."""

from __future__ import annotations

from typing import Any

from app.wire import events


def decode_event(raw: bytes | None, domains: dict[str, events.Domain]) -> tuple[Any, ...]:
    e = events.decode(raw, domains)
    return e.stream, e.user, e.ts, (e.value, e.amount) if domains[e.stream].sums else e.value
