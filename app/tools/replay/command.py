"""``dpstream replay``: the handler (arguments in :mod:`app.tools.cli`).

Noise: with the deployment's key in the environment (``DPSTREAM_NOISE_KEY`` or
``DPSTREAM_NOISE_KEY_FILE``, and ``DPSTREAM_DEPLOYMENT``, as the worker reads them) a replay
draws exactly the service's noise, so on the same events its releases are the service's; without
one it draws from ``--seed`` (repeatable) or from a fresh random key.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from datetime import UTC, tzinfo
from operator import attrgetter
from typing import IO
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tqdm import tqdm

from app.stream.config import Settings, StreamConfig, load_settings
from app.stream.errors import ConfigError
from app.tools.replay.open import OpenReplay
from app.tools.replay.read import BadRow, Row, file_format, parse_ts, read_rows
from app.tools.replay.run import Replay, check_replayable, replay_rows
from app.tools.replay.summary import OpenUtility, Utility

EXIT_CONFIG = 2
SHOWN_BAD = 1000
"""Malformed rows named one line each; past this many they are only counted."""
PREFIX = "dpstream replay: "


def _noise(settings: Settings, seed: int | None) -> tuple[bytes, str, str]:
    """``(key, deployment, what)``: the deployment's noise when its key is set, else a seed's
    or a fresh random key's."""
    if settings.noise_key is not None:
        key = settings.require_noise_key()
        return key, settings.deployment, f"the deployment's key ({settings.deployment})"
    if seed is not None:
        key = hashlib.sha256(b"dpstream replay\x00" + str(seed).encode()).digest()
        return key, "replay", f"seed {seed} (not the deployment's noise)"
    return secrets.token_bytes(32), "replay", "a fresh random key (not the deployment's noise)"


def _zone(name: str) -> tzinfo:
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"--tz {name!r} is not a time zone ({exc})") from None


class _Bad:
    """Names the first :data:`SHOWN_BAD` malformed rows on stderr, counts all of them."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts
        self.shown = 0

    def __call__(self, bad: BadRow) -> None:
        self.counts[bad.reason] = self.counts.get(bad.reason, 0) + 1
        self.shown += 1
        if self.shown <= SHOWN_BAD:
            tqdm.write(f"{PREFIX}{bad} (skipped)", file=sys.stderr)
        elif self.shown == SHOWN_BAD + 1:
            tqdm.write(f"{PREFIX}more malformed rows: counted, not shown", file=sys.stderr)


def _counted(lines: Iterable[str], bar: tqdm) -> Iterator[str]:
    """``lines``, moving ``bar`` by each one's length (characters: bytes, near enough)."""
    for line in lines:
        bar.update(len(line))
        yield line


def _read(args: argparse.Namespace, stream: StreamConfig, tz: tzinfo, bad: _Bad) -> list[Row]:
    rows: list[Row] = []
    size = args.events.stat().st_size
    with (
        open(args.events, encoding="utf-8", errors="surrogateescape", newline="") as f,
        tqdm(total=size, desc="read", unit="B", unit_scale=True, disable=args.quiet or None) as bar,
    ):
        fmt = args.format or file_format(args.events, f.read(4096))
        f.seek(0)
        labels = None if stream.is_open else frozenset(stream.labels)
        for row in read_rows(_counted(f, bar), fmt, tz, labels):
            if isinstance(row, BadRow):
                bad(row)
            else:
                rows.append(row)
    rows.sort(key=attrgetter("ts"))  # stable: rows of the same time keep the file's order
    return rows


def run_replay(args: argparse.Namespace) -> int:
    """``dpstream replay --events FILE --config STREAMS.yaml --stream ID [--out FILE]``."""
    try:
        settings = load_settings(config=args.config)
        stream = settings.stream(args.stream)
        check_replayable(stream)
        tz = _zone(args.tz)
        first = stream.slots.slot_of(parse_ts(args.start, tz)) if args.start else None
        last = stream.slots.slot_of(parse_ts(args.end, tz)) if args.end else None
        key, deployment, noise = _noise(settings, args.seed)
    except (ConfigError, ValueError) as exc:
        print(f"{PREFIX}{exc}", file=sys.stderr)
        return EXIT_CONFIG
    replay = (OpenReplay if stream.is_open else Replay)(stream, key, deployment, first, last)
    bad = _Bad(replay.tally.bad)
    try:
        rows = _read(args, stream, tz, bad)
    except OSError as exc:
        print(f"{PREFIX}cannot read {args.events}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    utility: Utility | OpenUtility = (OpenUtility if stream.is_open else Utility)(
        stream, k=args.top
    )
    with ExitStack() as stack:
        out: IO[str] = (
            stack.enter_context(open(args.out, "w", encoding="utf-8")) if args.out else sys.stdout
        )
        bar = stack.enter_context(
            tqdm(total=len(rows), desc="replay", unit=" rows", disable=args.quiet or None)
        )
        for r in replay_rows(replay, rows, bad, bar.update):
            utility.add(r)
            out.write(json.dumps(r.line(stream)) + "\n")
    summary = sys.stdout if args.out else sys.stderr
    print(f"noise: {noise}", file=summary)
    print("\n".join(utility.lines(replay.tally)), file=summary)
    return 0
