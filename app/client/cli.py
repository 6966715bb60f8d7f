"""Device verbs: ``dpstream simulate devices``.

Exit codes: 0 success (stopped by ``--duration`` or Ctrl-C), 2 invalid configuration or
arguments, 1 other failures. Heavy imports happen inside the handler.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

EXIT_CONFIG = 2


def _simulate_devices(args: argparse.Namespace) -> int:
    import numpy as np

    from app.client.simulator import Stats, ValueSource, run_devices
    from app.dp.noise import secure_rng
    from app.stream.config import load_settings
    from app.stream.errors import ServiceError
    from app.stream.kafka import confluent_config
    from app.stream.topics import load_topics

    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )  # fmt: skip
    try:
        settings = load_settings(config=args.config)
        stream = settings.stream(args.stream)
        if not stream.local:
            raise ValueError(f"stream {stream.id!r} is not a local stream (mode: local)")
        devices = args.devices or stream.users
        rng = np.random.default_rng(args.seed) if args.seed is not None else secure_rng()
        values = ValueSource(args.values, devices, stream.d, rng)
        topics = load_topics(settings.topic_prefix)
        kafka = confluent_config(settings)
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
            kafka, topics.collection_requests, topics.reports, stream, devices, values, stop,
            rng, stats,
        )  # fmt: skip
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        print(f"devices stream={stream.id} devices={devices} {stats.line()}", flush=True)
    return 0


def register(subparsers: Any) -> None:
    """Add the device verbs to the ``dpstream`` parser."""
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
        help="true values: synthetic:<sin|log|tlns> or dataset:<name> (default synthetic:sin)",
    )
    s.add_argument("--config", type=Path, help="streams YAML (default: $DPSTREAM_CONFIG)")
    s.add_argument("--duration", type=float, default=0.0, help="stop after N seconds (0: never)")
    s.add_argument("--seed", type=int, help="seed the devices' randomness (tests only)")
    s.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    s.set_defaults(func=_simulate_devices)
