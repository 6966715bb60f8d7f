"""Service verbs: ``dpstream worker``, ``topics create``, ``ledger show``.

The demo and the synthetic producer sit above the service, in :mod:`app.tools.cli`.

Each handler returns an exit code: 0 success, 2 invalid configuration or unreachable broker,
1 other failures. A user error is one line on stderr, never a traceback. Every verb that talks
to Kafka first probes the broker once (:func:`app.stream.kafka.probe`, bounded by
``--broker-timeout`` or ``DPSTREAM_BROKER_TIMEOUT_S``), so an unreachable broker is one line
within seconds instead of librdkafka's retry log. Heavy imports (Faust, Kafka clients) happen
inside the handlers.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from app.stream.errors import ConfigError, ServiceError

EXIT_CONFIG = 2
EXIT_FAILURE = 1


def _settings(args: argparse.Namespace) -> Any:
    from app.stream.config import load_settings

    return load_settings(config=getattr(args, "config", None))


def preflight(args: argparse.Namespace, match: bool = False) -> Any:
    """Load the settings and probe the broker once (with ``match``, then
    :func:`match_config`); return the settings.

    Raises the :class:`ServiceError` to print: a configuration error,
    :class:`~app.stream.errors.BrokerUnreachable` or :class:`ConfigMismatch`.
    """
    from app.stream.kafka import probe, probe_timeout_s

    settings = _settings(args)
    timeout_s = getattr(args, "broker_timeout", None) or probe_timeout_s()
    probe(settings, timeout_s)
    if match:
        match_config(settings, timeout_s)
    return settings


def match_config(settings: Any, timeout_s: float | None = None) -> None:
    """Refuse a configuration that does not describe the deployment the broker holds: a
    configured stream whose stored ledger was written by another mechanism or other parameters
    (its fingerprint). :class:`ConfigMismatch`, one line; streams without a ledger pass.

    The worker refuses the same ledger itself (:func:`~app.stream.ops.ledger_view.check_ledgers`,
    which says how to change a stream); the other verbs read the deployment with the file they
    were given, which is then most likely the wrong file.
    """
    from app.dp.errors import StateMismatchError
    from app.stream.kafka import probe_timeout_s
    from app.stream.ops.ledger_view import read_ledgers

    entries = read_ledgers(settings, timeout_s or probe_timeout_s())
    for stream in settings.streams:
        entry = entries.get(stream.id)
        if entry is None or entry.state is None:
            continue
        try:
            stream.build_mechanism().load_state(entry.state)
        except StateMismatchError as exc:
            raise ConfigMismatch(
                f"{settings.config_path} does not describe the deployment at {settings.broker}: "
                f"the ledger of stream {stream.id!r} was written under another configuration "
                f"({exc}); "
                "pass the worker's streams file (--config FILE or DPSTREAM_CONFIG; `dpstream "
                "demo` prints the line to export)"
            ) from None


class ConfigMismatch(ConfigError):
    """The streams file a verb was given is not the one the deployment's worker runs."""


def _fail(verb: str, exc: BaseException | str) -> None:
    print(f"dpstream {verb}: {exc}", file=sys.stderr)


def _kafka_error(exc: BaseException) -> str:
    """librdkafka's one-line text of a ``KafkaException`` (its first argument's ``str()``)."""
    first = exc.args[0] if exc.args else exc
    return str(first.str()) if hasattr(first, "str") else str(first)


def _worker(args: argparse.Namespace) -> int:
    """Pre-flight in this order: settings, noise key, broker, stored ledgers; then the worker."""
    from app.stream.kafka import probe, probe_timeout_s

    try:
        settings = _settings(args)
        settings.require_noise_key()
        probe(settings, args.broker_timeout or probe_timeout_s())
        # Faust and the ledgers' readers only now: an error above is said within a second.
        from app.stream.ops.ledger_view import check_ledgers

        check_ledgers(settings)
    except ServiceError as exc:
        _fail("worker", exc)
        return EXIT_CONFIG
    warn_streams(settings.streams, logging.getLogger("app.stream.worker"))
    from app.stream.worker import run

    try:
        return run(settings)
    except ServiceError as exc:
        _fail("worker", exc)
        return EXIT_CONFIG


def warn_streams(streams: Any, log: logging.Logger) -> None:
    """Log each stream's configuration warnings (:attr:`StreamConfig.warnings`) once."""
    for stream in streams:
        for line in stream.warnings:
            log.warning("stream=%s %s", stream.id, line)


def _topics_create(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    from app.stream.kafka import confluent_config
    from app.stream.topics import create_topics, load_topics

    try:
        settings = preflight(args)
        result = create_topics(load_topics(settings.topic_prefix), confluent_config(settings))
    except ServiceError as exc:
        _fail("topics create", exc)
        return EXIT_CONFIG
    except KafkaException as exc:
        _fail("topics create", _kafka_error(exc))
        return EXIT_FAILURE
    for name, what in sorted(result.items()):
        print(f"{name}\t{what}")
    return 0


def _ledger_show(args: argparse.Namespace) -> int:
    from confluent_kafka import KafkaException

    try:
        settings = _settings(args)
        stream = settings.stream(args.stream)
        settings = preflight(args, match=True)
        from app.stream.ops.ledger_view import watch

        return watch(settings, stream, args.timeout, args.json, args.watch)
    except ServiceError as exc:
        _fail("ledger show", exc)
        return EXIT_CONFIG
    except KafkaException as exc:
        _fail("ledger show", _kafka_error(exc))
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 0


def add_broker_timeout(p: argparse.ArgumentParser) -> None:
    """``--broker-timeout``: the pre-flight probe's bound (shared with :mod:`app.tools.cli`)."""
    p.add_argument(
        "--broker-timeout",
        type=float,
        metavar="S",
        help="give up after S seconds if no broker answers "
        "(default: $DPSTREAM_BROKER_TIMEOUT_S, else 5)",
    )


CONFIG_HELP = (
    "streams YAML (default: $DPSTREAM_CONFIG, else app/stream/default_streams.yaml; "
    "`dpstream demo` runs app/stream/demo_streams.yaml and prints the line to export)"
)
"""The ``--config`` help of every verb that reads the streams file."""


def register(subparsers: Any) -> None:
    """Add the service verbs to the ``dpstream`` parser."""
    config_help = CONFIG_HELP
    p = subparsers.add_parser(
        "worker",
        help="run the Faust worker (collect + release); configured by DPSTREAM_* variables",
    )
    p.add_argument("--config", type=Path, help=config_help)
    add_broker_timeout(p)
    p.set_defaults(func=_worker)

    p = subparsers.add_parser("topics", help="manage the Kafka topics described in topics/")
    tsub = p.add_subparsers(dest="topics_verb", metavar="ACTION", required=True)
    c = tsub.add_parser("create", help="create missing topics (idempotent)")
    c.add_argument("--config", type=Path, help=config_help)
    add_broker_timeout(c)
    c.set_defaults(func=_topics_create)

    p = subparsers.add_parser("ledger", help="inspect the privacy ledger")
    lsub = p.add_subparsers(dest="ledger_verb", metavar="ACTION", required=True)
    s = lsub.add_parser("show", help="window budget per group and the last releases of a stream")
    s.add_argument("-s", "--stream", required=True, help="stream id")
    s.add_argument("--config", type=Path, help=config_help)
    s.add_argument("--timeout", type=float, default=10.0, help="seconds to read the ledger")
    s.add_argument("--json", action="store_true", help="the budget view as JSON (UTC times)")
    s.add_argument(
        "--watch",
        type=float,
        default=0.0,
        metavar="S",
        help="re-read every S seconds until Ctrl-C (with --json: one JSON object per line)",
    )
    add_broker_timeout(s)
    s.set_defaults(func=_ledger_show)
