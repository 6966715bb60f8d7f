"""The release agent on in-memory tables, at a wall clock the tests move.

Shared by the tests of :mod:`app.stream.release` and :mod:`app.stream.ops.ledger_view`:
:func:`agent` builds a :class:`~app.stream.release.Releaser` over dicts standing for the
RocksDB tables, with a :class:`Clock` of its own (``r.clock``); :func:`run` hands it one
``partials`` value at a given wall time; :func:`recording_agent` builds one from a streams file
whose broker records what it is given (or refuses it, raising :class:`Boom`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from app.stream.config import Settings, load_settings
from app.stream.ops.late import LateSlots
from app.stream.ops.release_metrics import ReleaseMetrics
from app.stream.release import Releaser
from app.stream.topics import Topics, load_topics

TEST_ENV = {"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}
"""The environment of the agents under test: a fixed noise key and deployment name."""


class Boom(Exception):
    """The broker refused a record (a failing ``produce``)."""


class Clock:
    """The wall clock the tests move."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def sized_topics(events: int = 1, reports: int = 1) -> Topics:
    """The deployment's topics with ``events`` and ``reports`` of the given partition counts
    (the release agent refuses messages naming another count)."""
    base = load_topics()
    sizes = {"events": events, "reports": reports}
    specs = tuple(
        dataclasses.replace(s, partitions=sizes.get(s.role, s.partitions)) for s in base.specs
    )
    return dataclasses.replace(base, specs=specs)


async def _persisted() -> None:
    return None


def agent(
    settings: Settings,
    ledger: MutableMapping[str, bytes],
    slots: MutableMapping[str, bytes],
    produce: Callable[[str, bytes, bytes], Awaitable[Any]],
    topics: Topics | None = None,
) -> Releaser:
    """A release agent whose broker acknowledges every changelog write at once."""
    clock = Clock()
    r = Releaser(
        settings,
        topics or sized_topics(),
        ledger,
        slots,
        produce,
        _persisted,
        clock=clock,
        listeners=[ReleaseMetrics(LateSlots())],  # as the worker wires it
    )
    r.clock = clock  # type: ignore[attr-defined]
    return r


def run(r: Releaser, raw: bytes, now: float) -> None:
    """Hand ``raw`` to the agent at wall time ``now``."""
    r.clock.now = now  # type: ignore[attr-defined]
    asyncio.run(r.on_message(raw))


def recording_agent(
    config: Path,
    yaml: str,
    ledger: MutableMapping[str, bytes],
    slots: MutableMapping[str, bytes],
    sent: list[tuple[str, bytes]],
    fail_publish: bool = False,
) -> Releaser:
    """An agent of the streams ``yaml`` (written to ``config``) whose broker appends each
    ``(topic, value)`` to ``sent``, or raises :class:`Boom` on every record if
    ``fail_publish``."""
    config.write_text(yaml)
    settings = load_settings(env=TEST_ENV, config=config)

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        if fail_publish:
            raise Boom
        sent.append((topic, value))

    return agent(settings, ledger, slots, produce)
