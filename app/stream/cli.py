"""Service verbs: ``dpstream worker``, ``topics create``, ``ledger show``.

The demo and the synthetic producer sit above the service, in :mod:`app.tools.cli`.

Each handler returns an exit code: 0 success, 2 invalid configuration, 1 other failures.
Heavy imports (Faust, Kafka clients) happen inside the handlers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from app.stream.errors import ServiceError

EXIT_CONFIG = 2


def _settings(args: argparse.Namespace) -> Any:
    from app.stream.config import load_settings

    return load_settings(config=getattr(args, "config", None))


def _logging(level: str) -> None:
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s", stream=sys.stderr
    )


def _worker(args: argparse.Namespace) -> int:
    from app.stream.worker import run

    try:
        settings = _settings(args)
    except ServiceError as exc:
        print(f"dpstream worker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return run(settings)


def _topics_create(args: argparse.Namespace) -> int:
    from app.stream.kafka import confluent_config
    from app.stream.topics import create_topics, load_topics

    try:
        settings = _settings(args)
        result = create_topics(load_topics(settings.topic_prefix), confluent_config(settings))
    except ServiceError as exc:
        print(f"dpstream topics create: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    for name, what in sorted(result.items()):
        print(f"{name}\t{what}")
    return 0


def _ledger_show(args: argparse.Namespace) -> int:
    from app.stream.ledger_view import read_ledger, render

    try:
        settings = _settings(args)
        stream = settings.stream(args.stream)
        entry = read_ledger(settings, stream.id, timeout_s=args.timeout)
    except ServiceError as exc:
        print(f"dpstream ledger show: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if entry is None:
        print(f"no ledger for stream {stream.id!r} yet", file=sys.stderr)
        return 1
    print(render(stream, entry))
    return 0


def register(subparsers: Any) -> None:
    """Add the service verbs to the ``dpstream`` parser."""
    config_help = "streams YAML (default: $DPSTREAM_CONFIG, else the packaged demo file)"

    p = subparsers.add_parser(
        "worker",
        help="run the Faust worker (collect + release); configured by DPSTREAM_* variables",
    )
    p.add_argument("--config", type=Path, help=config_help)
    p.set_defaults(func=_worker)

    p = subparsers.add_parser("topics", help="manage the Kafka topics described in topics/")
    tsub = p.add_subparsers(dest="topics_verb", metavar="ACTION", required=True)
    c = tsub.add_parser("create", help="create missing topics (idempotent)")
    c.add_argument("--config", type=Path, help=config_help)
    c.set_defaults(func=_topics_create)

    p = subparsers.add_parser("ledger", help="inspect the privacy ledger")
    lsub = p.add_subparsers(dest="ledger_verb", metavar="ACTION", required=True)
    s = lsub.add_parser("show", help="window budget per group and the last releases of a stream")
    s.add_argument("--stream", required=True, help="stream id")
    s.add_argument("--config", type=Path, help=config_help)
    s.add_argument("--timeout", type=float, default=10.0, help="seconds to read the ledger")
    s.set_defaults(func=_ledger_show)
