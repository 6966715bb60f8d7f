"""Read what ``dpstream verify`` judges: a consistent snapshot of the topics of one deployment.

Each topic is read with a confluent-kafka consumer on manual assignment (no group, nothing
committed), from its beginning or from ``--since``, to the end every partition had when the
read began (its high watermark then; see :func:`_drain` for Tansu's), so a live deployment,
whose topics never fall quiet, is read in one pass; ``idle_s > 0`` also waits until nothing
new came for that long. At most ``max_s`` per topic: a topic not read to its end in time is an
error (:class:`ReadError`), never a partial verdict.

Order matters on a live deployment: outputs are read before the inputs that fed them
(``partials``, ``releases``, ``audit``, ``levels``, ``collection-requests``, then
``preferences``, then ``events`` or ``reports``), so every input a read output depends on is in
the snapshot; inputs that arrive later only show as values not released yet.

``levels`` and ``preferences`` (compacted histories) are always read from their beginning.
With ``since``, the other topics start at the first record stamped at or after
``since - margin_s``, and the accountant judges only slots that start at or after ``since``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from app.stream.errors import ServiceError
from app.stream.topics import Topics


class ReadError(ServiceError):
    """A topic could not be read to its end in time: raise ``--max-s`` or check the broker."""


class RecordError(ServiceError):
    """A record ``verify`` needs is malformed (the message names its topic, partition and
    offset): no verdict is given rather than one that guesses around it."""


class Msg(NamedTuple):
    """One Kafka record as the accountant needs it."""

    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


@dataclass
class Snapshot:
    """The records of every topic ``verify`` reads, each in (partition, offset) order."""

    events: list[Msg] = field(default_factory=list)
    """``events`` (central streams) or ``reports`` (local streams)."""
    preferences: list[Msg] = field(default_factory=list)
    levels: list[Msg] = field(default_factory=list)
    partials: list[Msg] = field(default_factory=list)
    releases: list[Msg] = field(default_factory=list)
    audit: list[Msg] = field(default_factory=list)
    requests: list[Msg] = field(default_factory=list)
    """``collection-requests`` (local streams only)."""
    input_partitions: int = 1
    """Partitions of ``events`` (or ``reports``): a user's key decides its partition."""
    since: float | None = None
    """Unix seconds: judge only the slots that start at or after it (None: everything)."""


ROLES_CENTRAL = ("partials", "releases", "audit", "levels", "preferences", "events")
ROLES_LOCAL = ("partials", "releases", "audit", "collection-requests", "preferences", "reports")
FROM_BEGINNING = frozenset({"levels", "preferences"})
ATTRIBUTE = {"collection-requests": "requests", "reports": "events"}


def read_snapshot(
    client_config: dict[str, Any],
    topics: Topics,
    local: bool,
    since: float | None = None,
    margin_s: float = 120.0,
    idle_s: float = 0.0,
    max_s: float = 300.0,
    progress: Callable[[str, int], Any] | None = None,
) -> Snapshot:
    """Read the snapshot of one deployment (see the module docstring).

    ``progress(topic, total)`` may return a tqdm-like object (``update(n)``, ``close()``).
    """
    snap = Snapshot(since=since)
    for role in ROLES_LOCAL if local else ROLES_CENTRAL:
        start_ms = None if since is None or role in FROM_BEGINNING else (since - margin_s) * 1000
        msgs, parts = read_topic(
            client_config, topics.name(role), start_ms, idle_s, max_s, progress
        )
        setattr(snap, ATTRIBUTE.get(role, role), msgs)
        if role in ("events", "reports"):
            snap.input_partitions = parts
    return snap


def read_topic(
    client_config: dict[str, Any],
    topic: str,
    start_ms: float | None,
    idle_s: float,
    max_s: float,
    progress: Callable[[str, int], Any] | None = None,
) -> tuple[list[Msg], int]:
    """Every record of ``topic`` from ``start_ms`` (None: the beginning) to the end it had when
    the read started (then, with ``idle_s > 0``, until nothing new came for ``idle_s``), and the
    topic's partition count."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            **client_config,
            "group.id": f"dpstream-verify-{time.time_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise ReadError(f"topic {topic} not found (check DPSTREAM_TOPIC_PREFIX)")
        parts = sorted(meta.partitions)
        if start_ms is None:
            assignment = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts]
        else:
            wanted = [TopicPartition(topic, p, int(start_ms)) for p in parts]
            assignment = consumer.offsets_for_times(wanted, timeout=30)
        ends: dict[int, int] = {}
        total = 0
        for tp in assignment:
            low, high = consumer.get_watermark_offsets(tp, timeout=30)
            first = (
                tp.offset if tp.offset >= 0 else (low if tp.offset == OFFSET_BEGINNING else high)
            )
            if high > first:
                ends[tp.partition] = high
                total += high - first
        reading = [tp for tp in assignment if tp.partition in ends]
        consumer.assign(reading)
        bar = progress(topic, total) if progress is not None else None
        out = _drain(consumer, topic, ends, idle_s, max_s, bar)
        if bar is not None:
            bar.close()
        out.sort(key=lambda m: (m.partition, m.offset))
        return out, len(parts)
    finally:
        consumer.close()


def _drain(
    consumer: Any, topic: str, ends: dict[int, int], idle_s: float, max_s: float, bar: Any
) -> list[Msg]:
    """Consume until every partition of ``ends`` is read to its end.

    A partition's end is its high watermark at the start, raised once to the watermark of the
    first fetch response that reaches it: Tansu lists a partition's end as the first offset of
    its last record batch plus one, while its fetch responses carry the true one, so the end
    is the one the partition had when the read began on either broker.
    """
    from confluent_kafka import TopicPartition

    out: list[Msg] = []
    new = tuple.__new__  # Msg(...) without its Python-level constructor: one per record
    seen: dict[int, int] = {}
    confirmed: set[int] = set()
    deadline = time.monotonic() + max_s
    last = time.monotonic()
    while True:
        now = time.monotonic()
        reached = all(seen.get(p, -1) + 1 >= end for p, end in ends.items())
        if reached and now - last >= idle_s:
            return out
        if now > deadline:
            raise ReadError(
                f"{topic} not read to its end in {max_s:g} s ({len(out)} records read): "
                "raise --max-s, or check the broker"
            )
        got = len(out)
        for m in consumer.consume(num_messages=5000, timeout=0.2):
            if m.error():
                continue
            p, off = m.partition(), m.offset()
            if p not in confirmed:
                confirmed.add(p)
                fetched = consumer.get_watermark_offsets(TopicPartition(topic, p), cached=True)
                ends[p] = max(ends[p], int(fetched[1]))
            seen[p] = off  # a partition's records come in offset order
            out.append(new(Msg, (p, off, m.timestamp()[1], m.key(), m.value())))
        got = len(out) - got
        if got:
            last = time.monotonic()
            if bar is not None:
                bar.update(got)
