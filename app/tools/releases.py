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

An open-domain stream's release (``domain: open``) is a key -> count map: its lines show the
``--top K`` keys of largest released count (default 10; ties by key), a key selected at this
slot marked ``+``, and how many keys the slot released; ``--wide`` adds the threshold, the
retired keys and the eps and delta spent per level, and ``--json`` a ``top`` list of ``[key,
count]`` pairs. The ranking is of released (noised) counts, so it is public too.

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


TOP = 10
"""An open stream's keys shown per slot unless ``--top`` says otherwise."""


def top_keys(release: SlotRelease, k: int) -> list[tuple[str, float]]:
    """An open stream's ``k`` keys of largest released count, ties by key (public: the
    counts are the released ones).

    >>> r = SlotRelease("urls", 3, 30.0, 40.0, (5.0, 9.0, 5.0), True, "open_uniform", {}, 1, 2,
    ...                 keys=("/a", "/b", "/c"), new_keys=("/c",), status="publish",
    ...                 threshold=4, retired=(), spent_exact_by_group={},
    ...                 delta_spent_by_group={}, delta_spent_exact_by_group={})
    >>> top_keys(r, 2)
    [('/b', 9.0), ('/a', 5.0)]
    """
    return sorted(release.key_counts().items(), key=lambda kv: (-kv[1], kv[0]))[:k]


def open_line(release: SlotRelease, k: int = TOP, wide: bool = False) -> str:
    """An open stream's line: head, the top ``k`` keys (``+``: selected at this slot; as many
    as fit in :data:`COMPACT_WIDTH`), and how many keys the slot released; ``wide`` shows all
    ``k`` and adds the threshold, retired keys and spending.

    >>> r = SlotRelease("urls", 3, 30.0, 40.0, (5.0, 9.0, 5.0), True, "open_uniform",
    ...                 {"std": 0.1}, 1, 2, keys=("/a", "/b", "/c"), new_keys=("/c",),
    ...                 status="publish", threshold=4, retired=("/z",),
    ...                 spent_exact_by_group={"std": "1/10"}, delta_spent_by_group={"std": 1e-7},
    ...                 delta_spent_exact_by_group={"std": "1/10000000"})
    >>> print(open_line(r, 2))
    urls 3 00:00:30Z fresh  | /b=9 /a=5 | 3 keys, 1 new
    >>> print(open_line(r, 5, wide=True))  # doctest: +NORMALIZE_WHITESPACE
    urls slot 3 1970-01-01T00:00:30Z..00:00:40Z fresh open_uniform | /b=9 /a=5 /c+=5 | 3 keys,
    1 new, threshold 4, retired 1 | spent std eps=0.1 delta=1e-07
    """
    new = set(release.new_keys or ())
    cells = [f"{key}{'+' if key in new else ''}={x:.0f}" for key, x in top_keys(release, k)]
    size = f"{len(release.keys or ())} keys, {len(new)} new"
    kind = "fresh " if release.fresh else "repeat"
    if not wide:
        head = f"{release.stream} {release.slot} {release.start_utc[11:]} {kind} |"
        tail = f" | {size}"
        fit = len(cells)
        while fit and len(" ".join([head, *cells[:fit]])) + len(tail) > COMPACT_WIDTH:
            fit -= 1
        more = f" (+{len(cells) - fit}, --wide)" if fit < len(cells) else ""
        return " ".join([head, *cells[:fit]]) + more + tail
    shown = " ".join(cells)
    delta = release.delta_spent_by_group or {}
    spent = " ".join(
        f"{level} eps={eps:.4g} delta={delta.get(level, 0.0):.4g}"
        for level, eps in release.spent_by_group.items()
    )
    return (
        f"{release.stream} slot {release.slot} {release.start_utc}..{release.end_utc[11:]} "
        f"{kind} {release.mechanism} | {shown} | {size}, threshold {release.threshold}, "
        f"retired {len(release.retired or ())} | spent {spent}"
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


def open_legend(stream: str, k: int, slot_s: float | None) -> str:
    """What an open stream's lines show, printed once (on stderr) before them."""
    slot = f"{slot_s:g} s " if slot_s else ""
    return (
        f"{stream}: slot number, {slot}slot start (UTC), fresh or repeat, then the top {k} "
        "keys by released count (+ = selected at this slot) and how many keys the slot "
        "released. --wide: threshold, retired keys, eps and delta spent."
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
        if stream is not None and stream.is_open:
            print(open_legend(args.stream, args.top, stream.slot_s), file=sys.stderr)
        else:
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
    k = getattr(args, "top", TOP)
    if not args.json:
        if release.is_open:
            return open_line(release, k, wide=getattr(args, "wide", False))
        if getattr(args, "wide", False):
            return format_line(release, labels)
        return compact_line(release, frequencies)
    out: dict[str, Any] = release.to_json()
    if release.is_open:
        out["top"] = [list(pair) for pair in top_keys(release, k)]
    elif labels is not None:
        out["labels"] = list(labels)
    return json.dumps(out, separators=(",", ":"))
