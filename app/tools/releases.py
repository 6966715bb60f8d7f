"""``dpstream releases tail``: print a stream's released histograms, one line (or JSON) a slot.

It reads the ``releases`` topic with :class:`app.client.releases.ReleaseReader` (schema check,
byte-identical duplicates dropped by ``(stream, slot)``). A readable line names the slot's
start and end in UTC, fresh or repeat, the histogram by label (when the stream is in the
configuration; else by index) and the budget spent per level in that slot; ``--json`` prints
one JSON object per slot instead (:meth:`~app.client.releases.SlotRelease.to_json`, plus
``labels`` when known), for ``jq`` or a pipeline. Everything printed is public.

Exit codes: 0 after ``--idle-exit`` seconds without a new release or Ctrl-C; 2 for a
configuration error or an unreachable broker; 1 when a record of a newer schema arrives.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from app.client.releases import NewerSchemaError, ReleaseReader, SlotRelease
from app.stream.config import load_settings
from app.stream.errors import ServiceError
from app.stream.kafka import confluent_config, probe, probe_timeout_s
from app.stream.topics import load_topics

EXIT_CONFIG = 2
EXIT_SCHEMA = 1


def format_line(release: SlotRelease, labels: tuple[str, ...] | None = None) -> str:
    """One readable line for a released slot.

    >>> r = SlotRelease("web", 29, 1740.0, 1800.0, (3.25, -1.0), False, "pba",
    ...                 {"strict": 0.0}, 1, 1)
    >>> print(format_line(r, ("news", "sports")))
    web slot 29 1970-01-01 00:29:00Z..00:30:00Z repeat pba | news=3.2 sports=-1.0 | spent strict=0
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
    )


def tail(args: argparse.Namespace) -> int:
    """The ``releases tail`` verb."""
    try:
        settings = load_settings(config=args.config)
        known = {s.id: s for s in settings.streams}
        stream = known.get(args.stream)
        topic = load_topics(settings.topic_prefix).releases
        probe(settings, args.broker_timeout or probe_timeout_s())
        reader = ReleaseReader(
            confluent_config(settings), topic, stream=args.stream,
            from_beginning=args.from_beginning,
        )  # fmt: skip
    except ServiceError as exc:
        print(f"dpstream releases tail: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if stream is None:
        print(
            f"dpstream releases tail: stream {args.stream!r} is not in {settings.config_path}; "
            "histograms are shown by index (pass --config FILE for its labels)",
            file=sys.stderr,
        )
    labels = tuple(stream.labels) if stream is not None else None
    last = time.monotonic()
    try:
        with reader:
            while args.idle_exit <= 0 or time.monotonic() - last < args.idle_exit:
                release = reader.poll(0.5)
                if release is None:
                    continue
                last = time.monotonic()
                print(_render(release, labels, args.json), flush=True)
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


def _render(release: SlotRelease, labels: tuple[str, ...] | None, as_json: bool) -> str:
    if not as_json:
        return format_line(release, labels)
    out: dict[str, Any] = release.to_json()
    if labels is not None:
        out["labels"] = list(labels)
    return json.dumps(out, separators=(",", ":"))
