"""Verbs of the tools above the service: ``demo``, ``produce``, ``simulate devices``,
``releases tail`` and ``replay``.

Exit codes: 0 success (stopped by ``--duration`` or Ctrl-C), 2 invalid configuration or
arguments, 1 other failures. Heavy imports happen inside the handlers.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from app.stream.cli import CONFIG_HELP, add_broker_timeout

EXIT_CONFIG = 2


def _simulate_devices(args: argparse.Namespace) -> int:
    import numpy as np

    from app.dp.noise import secure_rng
    from app.stream.cli import match_config
    from app.stream.config import load_settings
    from app.stream.errors import ServiceError
    from app.stream.kafka import confluent_config, probe, probe_timeout_s
    from app.stream.topics import load_topics
    from app.tools.simulator import Stats, ValueSource, run_devices
    from app.utc import UTCFormatter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(UTCFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=args.log_level, handlers=[handler])
    try:
        settings = load_settings(config=args.config)
        if args.stream not in [s.id for s in settings.streams]:
            local = [s.id for s in settings.streams if s.local]
            raise ValueError(
                f"no stream {args.stream!r} in {settings.config_path} (its local streams: "
                f"{local or 'none'}); pass --config FILE or set DPSTREAM_CONFIG"
            )
        stream = settings.stream(args.stream)
        if not stream.local:
            raise ValueError(f"stream {stream.id!r} is not a local stream (mode: local)")
        devices = args.devices or stream.users
        rng = np.random.default_rng(args.seed) if args.seed is not None else secure_rng()
        values = ValueSource(args.values, devices, stream.d, rng)
        topics = load_topics(settings.topic_prefix)
        kafka = confluent_config(settings)
        probe(settings, args.broker_timeout or probe_timeout_s())
        match_config(settings, args.broker_timeout)
    except (ServiceError, ValueError) as exc:
        print(f"dpstream simulate devices: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    stop = threading.Event()
    if args.duration > 0:
        threading.Timer(args.duration, stop.set).start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stats = Stats()
    try:
        run_devices(
            kafka,
            topics.collection_requests,
            topics.reports,
            stream,
            devices,
            values,
            stop,
            rng,
            stats,
            preferences_topic=topics.preferences,
        )
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        print(f"devices stream={stream.id} devices={devices} {stats.line()}", flush=True)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from app.stream.errors import ServiceError
    from app.tools.demo import run_demo

    try:
        return int(run_demo(args))
    except ServiceError as exc:
        print(f"dpstream demo: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _produce(args: argparse.Namespace) -> int:
    from app.stream.errors import ServiceError
    from app.tools.produce import produce_events

    try:
        return produce_events(args)
    except ServiceError as exc:
        print(f"dpstream produce: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _releases_tail(args: argparse.Namespace) -> int:
    from app.tools.releases import tail

    return tail(args)


def _replay(args: argparse.Namespace) -> int:
    from app.tools.replay.command import run_replay

    return run_replay(args)


REPLAY_HELP = """Run a file of your own events through a stream of STREAMS.yaml exactly as the
service would count and release them (slots, one value per user per slot, contribution bounds,
levels and preferences, the mechanism and its noise), offline, without a broker. Writes one
JSON line per slot (slot, start, released histogram, fresh or repeated, budget spent) and
prints the utility against the exact histograms (MAE, top-k recall; an open-domain stream's
key -> count maps: MAE over true and released keys, top-10/100 recall and precision). With
the deployment's DPSTREAM_NOISE_KEY and DPSTREAM_DEPLOYMENT set, the noise (and an open
stream's max_keys bound) is the service's: the releases are
the ones it would publish. Rows are user,ts,value (CSV with a header, or JSON lines), plus
amount for a sum stream and an optional level (the user's preference from ts on); ts is Unix
seconds or ISO 8601 (any offset; naive times in --tz). Rows may come in any order; a malformed
row is named on stderr, skipped and counted. See docs/replay.md."""


def _add_replay(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "replay",
        help="your own events file through a stream, offline, as the service would release it",
        description=REPLAY_HELP,
    )
    p.add_argument("--events", type=Path, required=True, metavar="FILE", help="CSV or JSON lines")
    p.add_argument("--config", type=Path, required=True, metavar="STREAMS.yaml", help=CONFIG_HELP)
    p.add_argument("--stream", required=True, metavar="ID", help="id of a central stream")
    p.add_argument("--out", type=Path, metavar="FILE", help="JSON lines (default: stdout)")
    p.add_argument("--format", choices=("csv", "jsonl"), help="default: by the extension")
    p.add_argument("--tz", default="UTC", help="time zone of times without an offset (UTC)")
    p.add_argument("--from", dest="start", metavar="TIME", help="first slot: the one of TIME")
    p.add_argument("--to", dest="end", metavar="TIME", help="last slot: the one of TIME")
    p.add_argument(
        "--seed", type=int, help="without a noise key in the environment: repeatable noise"
    )
    p.add_argument("--top", type=int, default=10, metavar="K", help="top-k of the summary")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_replay)


def _add_producer_arguments(p: argparse.ArgumentParser, config_help: str) -> None:
    """The synthetic producer's options, shared by ``demo`` and ``produce``."""
    p.add_argument("--config", type=Path, help=config_help)
    p.add_argument("--rate", type=float, default=200.0, help="events per second per stream")
    p.add_argument("--users", type=int, default=500, help="synthetic users")
    p.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0: never)")
    add_broker_timeout(p)


def register(subparsers: Any) -> None:
    """Add the tools' verbs to the ``dpstream`` parser."""
    config_help = CONFIG_HELP
    p = subparsers.add_parser(
        "demo",
        help="embedded broker (unless DPSTREAM_BROKER is set) + topics + worker + synthetic "
        "events; prints each release; Ctrl-C stops everything",
    )
    _add_producer_arguments(p, config_help)
    p.add_argument(
        "--mode",
        choices=("central", "local"),
        default="central",
        help="central: synthetic events; local: simulated devices answering collection "
        "requests (default streams: app/stream/local_streams.yaml)",
    )
    p.set_defaults(rate=1000.0, users=2000)  # demo.DEMO_RATE, DEMO_USERS (no import here)
    p.add_argument(
        "--post",
        choices=("none", "clamp"),
        default="none",
        help="post-process what is printed: clamp at 0 and round (no privacy cost)",
    )
    p.add_argument(
        "--wide",
        action="store_true",
        help="each release by label, with the budget each user spent (default: the compact "
        "line of `releases tail`)",
    )
    p.set_defaults(func=_demo)

    p = subparsers.add_parser(
        "produce",
        help="synthetic events for the central streams of the configuration (broker and "
        "topics from DPSTREAM_*); SIGTERM or Ctrl-C stops it",
    )
    _add_producer_arguments(p, config_help)
    p.set_defaults(func=_produce)

    p = subparsers.add_parser("releases", help="read the released histograms")
    rsub = p.add_subparsers(dest="releases_verb", metavar="ACTION", required=True)
    t = rsub.add_parser(
        "tail",
        help="print a stream's releases as they come: one compact line (UTC times; --wide: "
        "everything) or JSON object per slot; schema checked, byte-identical duplicates dropped",
    )
    t.add_argument("-s", "--stream", required=True, help="stream id")
    t.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the oldest retained release (default: the next one published)",
    )
    t.add_argument("--json", action="store_true", help="one JSON object per slot")
    t.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="K",
        help="open-domain streams: the K keys of largest released count per slot (default 10)",
    )
    t.add_argument(
        "--wide",
        action="store_true",
        help="the whole slot per line: labels, start and end, mechanism, budget spent "
        "(default: a compact line of at most 100 characters)",
    )
    t.add_argument(
        "--idle-exit",
        type=float,
        default=0.0,
        metavar="S",
        help="exit after S seconds without a new release (default 0: never)",
    )
    t.add_argument(
        "--count",
        type=int,
        default=0,
        metavar="N",
        help="exit after N releases (default 0: never; the chart's smoke test reads one)",
    )
    t.add_argument("--config", type=Path, help=f"{config_help}; gives the labels")
    add_broker_timeout(t)
    t.set_defaults(func=_releases_tail)

    p = subparsers.add_parser("simulate", help="simulated clients against the broker")
    sub = p.add_subparsers(dest="simulate_verb", metavar="WHAT", required=True)
    s = sub.add_parser(
        "devices",
        help="N devices of a local stream answering collection requests on the reports topic "
        "(broker and topics from DPSTREAM_*)",
    )
    s.add_argument("--stream", required=True, help="id of a `mode: local` stream")
    s.add_argument(
        "--devices", type=int, default=0, help="devices 0..N-1 (default: every registered user)"
    )
    s.add_argument(
        "--values",
        default="synthetic:sin",
        help="true values: synthetic:<sin|log|tlns|wave> or dataset:<name> (default synthetic:sin)",
    )
    s.add_argument("--config", type=Path, help=CONFIG_HELP)
    s.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0: never)")
    s.add_argument("--seed", type=int, help="seed the devices' randomness (tests only)")
    s.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    add_broker_timeout(s)
    s.set_defaults(func=_simulate_devices)

    _add_replay(subparsers)
