"""The ``dpstream verify`` verb: a per-user accountant over a deployment's topics.

Exit codes: 0 no violation, 1 a violation (the report says which), 2 a usage, configuration or
broker error, a malformed record, or a verdict refused (:mod:`app.verify.fit`): one line on
stderr, whatever went wrong (1 is never a crash). Heavy imports happen inside the handler.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from app.stream.cli import CONFIG_HELP, add_broker_timeout

EXIT_VIOLATION = 1
EXIT_CONFIG = 2


def parse_time(text: str) -> float:
    """``--since``: Unix seconds, or an ISO-8601 time (UTC unless it names a zone).

    >>> parse_time("1700000000"), parse_time("2023-11-14T22:13:20")
    (1700000000.0, 1700000000.0)
    """
    try:
        return float(text)
    except ValueError:
        pass
    from datetime import UTC

    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected Unix seconds or an ISO-8601 time, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _verify(args: argparse.Namespace) -> int:
    from app.stream.config import load_settings
    from app.stream.errors import ServiceError
    from app.stream.kafka import probe, probe_timeout_s
    from app.verify.report import to_json, to_text
    from app.verify.run import verify

    try:
        settings = load_settings(config=args.config)
        settings.stream(args.stream)
        probe(settings, args.broker_timeout or probe_timeout_s())
        verdict = verify(
            settings,
            args.stream,
            since=args.since,
            idle_s=args.idle_s,
            max_s=args.max_s,
            progress=not args.json and not args.no_progress,
        )
    except ServiceError as exc:
        print(f"dpstream verify: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except Exception as exc:  # noqa: BLE001 - exit 1 means a violation, never a crash
        print(f"dpstream verify: cannot judge ({type(exc).__name__}: {exc})", file=sys.stderr)
        return EXIT_CONFIG
    out = to_json(verdict, args.show_users) if args.json else to_text(verdict, args.show_users)
    print(out, flush=True)
    return 0 if verdict.ok else EXIT_VIOLATION


def register(subparsers: Any) -> None:
    """Add ``verify`` to the ``dpstream`` parser."""
    p = subparsers.add_parser(
        "verify",
        help="recompute, user by user, where every value had to count and what every user "
        "spent, from the topics (broker and topics from DPSTREAM_*); exit 1 on a violation",
    )
    p.add_argument("-s", "--stream", required=True, help="stream id")
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--from-beginning",
        action="store_true",
        help="judge everything the topics retain (the default)",
    )
    when.add_argument(
        "--since",
        type=parse_time,
        metavar="TIME",
        help="judge the slots from TIME on (Unix seconds or ISO-8601, UTC by default)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object instead of text")
    p.add_argument(
        "--show-users",
        action="store_true",
        help="print the user ids of violations (the output is then as sensitive as events)",
    )
    p.add_argument("--config", type=Path, help=CONFIG_HELP)
    p.add_argument(
        "--idle-s",
        type=float,
        default=0.0,
        metavar="S",
        help="after reading each topic to the end it had when verify started, also wait until "
        "nothing new came for S seconds (default 0: a live deployment is judged at once)",
    )
    p.add_argument(
        "--max-s",
        type=float,
        default=300.0,
        metavar="S",
        help="give up (exit 2) if a topic is not read to its end in S seconds (default 300)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_broker_timeout(p)
    p.set_defaults(func=_verify)
