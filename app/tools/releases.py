"""``dpstream releases tail``: print a stream's released histograms, one line (or JSON) a slot.

It reads the ``releases`` topic with :class:`app.client.releases.ReleaseReader` (schema check,
byte-identical duplicates dropped by ``(stream, slot)``). The default line is compact (at most
:data:`COMPACT_WIDTH` characters): stream, slot number (the topic's, as everywhere), the slot's
start in UTC, fresh or repeat, and the values in label order, named once by a legend on stderr.
``--wide`` prints the whole slot: start and end in UTC, the histogram by label (when the stream
is in the configuration; else by index), the mechanism, the budget spent per level and the
guarantee the release carries (:func:`~app.client.releases.guarantee_text`);
``--json`` prints one JSON object per slot (:meth:`~app.client.releases.SlotRelease.to_json`,
plus ``labels`` when known), for ``jq`` or a pipeline. Everything printed is public.

Before it waits, it looks at the last records of the topic: a stream that is neither there nor
in the configuration is refused at once (exit 2), naming the streams seen, as ``kcat`` would
show them; a configured stream without releases yet gets a note, and the wait.

Exit codes: 0 after ``--count`` releases, ``--idle-exit`` seconds without a new release or
Ctrl-C; 2 for a
configuration error, an unreachable broker or a stream seen nowhere; 1 when a record of a newer
schema arrives.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from app.client.releases import ReleaseReader, guarantee_text
from app.stream.cli import match_config
from app.stream.config import load_settings
from app.stream.errors import ServiceError
from app.stream.kafka import confluent_config, probe, probe_timeout_s
from app.stream.topics import load_topics
from app.wire.errors import NewerSchemaError
from app.wire.releases import SlotRelease

EXIT_CONFIG = 2
EXIT_SCHEMA = 1


COMPACT_WIDTH = 100
"""A compact line stops before this many characters (``--wide`` prints everything)."""


def format_line(release: SlotRelease, labels: tuple[str, ...] | None = None) -> str:
    """One readable line for a released slot, with everything (``--wide``).

    >>> r = SlotRelease("web", 29, 1740.0, 1800.0, (3.25, -1.0), False, "pba",
    ...                 {"strict": 0.0}, 1, 1)
    >>> print(format_line(r, ("news", "sports")))  # doctest: +NORMALIZE_WHITESPACE
    web slot 29 1970-01-01T00:29:00Z..00:30:00Z repeat pba | news=3.2 sports=-1.0 | spent strict=0
    | guarantee not stated (a record written before the field)
    """
    names = labels if labels and len(labels) == len(release.histogram) else None
    hist = " ".join(f"{names[i] if names else i}={x:.1f}" for i, x in enumerate(release.histogram))
    spent = " ".join(f"{k}={v:.4g}" for k, v in release.spent_by_group.items())
    kind = "fresh " if release.fresh else "repeat"
    if release.delayed and release.released_at is not None:
        kind += f" (delayed to {release.released_at - release.end:.0f} s after its end)"
    return (
        f"{release.stream} slot {release.slot} {release.start_utc}..{release.end_utc[11:]} "
        f"{kind} {release.mechanism} | {hist} | spent {spent}"
        f" | guarantee {guarantee_text(release.guarantee)}"
    )


def compact_line(release: SlotRelease, frequencies: bool = False) -> str:
    """The default line: stream, slot, start (UTC time of day), fresh or repeat, the values in
    label order (:func:`legend` names them), cut to :data:`COMPACT_WIDTH` characters.

    >>> r = SlotRelease("web", 29, 1740.0, 1800.0, (3.25, -1.0), False, "pba", {}, 1, 1)
    >>> print(compact_line(r))
    web 29 00:29:00Z repeat |    3   -1
    >>> wide = SlotRelease("web", 29, 1740.0, 1800.0, tuple(range(40)), True, "pba", {}, 1, 1)
    >>> line = compact_line(wide); len(line) <= COMPACT_WIDTH, line[-13:]
    (True, '(+28, --wide)')
    """
    head, cells, rest = compact_parts(release, frequencies)
    return " ".join([head, *cells]) + rest


def compact_parts(release: SlotRelease, frequencies: bool = False) -> tuple[str, list[str], str]:
    """The compact line's head (up to its ``|``), the value cells that fit in
    :data:`COMPACT_WIDTH`, and what ends the line when some do not (``" (+N, --wide)"``, else
    ``""``). Counts are 4 characters wide, frequencies 6 (the demo aligns its truth on them)."""
    kind = "fresh " if release.fresh else "repeat"
    if release.delayed:
        kind = "fresh*" if release.fresh else "repeat*"
    head = f"{release.stream} {release.slot} {release.start_utc[11:]} {kind} |"
    cells = [f"{x:6.3f}" if frequencies else f"{x:4.0f}" for x in release.histogram]
    width = len(head)
    for i, cell in enumerate(cells):
        rest = f" (+{len(cells) - i}, --wide)"
        if width + 1 + len(cell) + (len(rest) if i < len(cells) - 1 else 0) > COMPACT_WIDTH:
            return head, cells[:i], rest
        width += 1 + len(cell)
    return head, cells, ""


def legend(stream: str, labels: tuple[str, ...] | None, slot_s: float | None) -> str:
    """What the compact lines' columns are, printed once (on stderr) before them."""
    names = " ".join(labels) if labels else "by index"
    slot = f"{slot_s:g} s " if slot_s else ""
    return (
        f"{stream}: slot number, {slot}slot start (UTC), fresh or repeat (* = delayed), then the "
        f"released values: {names}. --wide: labels, end, mechanism, budget spent."
    )


def streams_seen(
    config: dict[str, Any], topic: str, timeout_s: float, last: int = 1000
) -> list[str]:
    """The stream ids (record keys) among the last ``last`` records of each partition of
    ``topic``, read for at most ``timeout_s`` seconds."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            **config,
            "group.id": f"dpstream-tail-scan-{time.time_ns()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    seen: set[str] = set()
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return []
        assigned = []
        for p in meta.partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout_s)
            if high > low:
                assigned.append(TopicPartition(topic, p, max(low, high - last)))
        if not assigned:
            return []
        consumer.assign(assigned)
        pending, deadline = len(assigned), time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                pending -= error.code() == KafkaError._PARTITION_EOF
                continue
            seen.add((msg.key() or b"").decode("utf-8", "replace"))
    finally:
        consumer.close()
    return sorted(seen)


def tail(args: argparse.Namespace) -> int:
    """The ``releases tail`` verb."""
    try:
        settings = load_settings(config=args.config)
        known = {s.id: s for s in settings.streams}
        stream = known.get(args.stream)
        topic = load_topics(settings.topic_prefix).releases
        timeout_s = args.broker_timeout or probe_timeout_s()
        probe(settings, timeout_s)
        match_config(settings, timeout_s)
        seen = streams_seen(confluent_config(settings), topic, timeout_s)
        reader = ReleaseReader(
            confluent_config(settings),
            topic,
            stream=args.stream,
            from_beginning=args.from_beginning,
        )
    except ServiceError as exc:
        print(f"dpstream releases tail: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    others = ", ".join(seen) or "none"
    if stream is None and args.stream not in seen:
        print(
            f"dpstream releases tail: no releases of stream {args.stream!r} on topic {topic} "
            f"(streams seen there: {others}) and it is not in {settings.config_path} "
            f"(streams: {', '.join(known) or 'none'}); check the id, or pass --config FILE",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if stream is None:
        print(
            f"dpstream releases tail: stream {args.stream!r} is not in {settings.config_path}; "
            "histograms are shown by index (pass --config FILE for its labels)",
            file=sys.stderr,
        )
    elif args.stream not in seen:
        print(
            f"dpstream releases tail: no releases of stream {args.stream!r} on topic {topic} "
            f"yet (streams seen there: {others}); waiting for its first (Ctrl-C stops)",
            file=sys.stderr,
        )
    labels = tuple(stream.labels) if stream is not None else None
    frequencies = stream is not None and stream.local
    if not args.json and not args.wide:
        print(legend(args.stream, labels, stream.slot_s if stream else None), file=sys.stderr)
    last = time.monotonic()
    count = getattr(args, "count", 0)
    shown = 0
    try:
        with reader:
            while args.idle_exit <= 0 or time.monotonic() - last < args.idle_exit:
                release = reader.poll(0.5)
                if release is None:
                    continue
                last = time.monotonic()
                print(_render(release, labels, args, frequencies), flush=True)
                shown += 1
                if shown == count:
                    break
    except NewerSchemaError as exc:
        print(f"dpstream releases tail: {exc}", file=sys.stderr)
        return EXIT_SCHEMA
    except KeyboardInterrupt:
        pass
    dedup = reader.dedup
    if dedup.duplicates or dedup.conflicts or reader.bad:
        print(
            f"releases tail: dropped {dedup.duplicates} byte-identical duplicates, "
            f"{dedup.conflicts} conflicting copies, {reader.bad} bad records",
            file=sys.stderr,
        )
    return 0


def _render(
    release: SlotRelease,
    labels: tuple[str, ...] | None,
    args: argparse.Namespace,
    frequencies: bool,
) -> str:
    if not args.json:
        if getattr(args, "wide", False):
            return format_line(release, labels)
        return compact_line(release, frequencies)
    out: dict[str, Any] = release.to_json()
    if labels is not None:
        out["labels"] = list(labels)
    return json.dumps(out, separators=(",", ":"))
