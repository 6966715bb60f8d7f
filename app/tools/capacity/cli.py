"""``dpstream capacity``: the capacity benchmarks of the service, on a real broker.

* ``capacity throughput``: CPU per event of the workers against bare consumer loops (aiokafka
  and confluent-kafka), a ``--users`` sweep, release latency, memory per open slot
  (:mod:`app.tools.capacity.throughput`);
* ``capacity recovery``: time for releases to come back after each ``kill -9`` of the worker
  (:mod:`app.tools.capacity.recovery`);
* ``capacity overload``: ``/readyz`` latency and reasons under overload
  (:mod:`app.tools.capacity.overload`);
* ``capacity churn``: K workers with members joining, leaving and timing out during ingest;
  counted == sent and ``verify`` clean (:mod:`app.tools.capacity.churn`);
* ``capacity open-keys``: peak RSS and times of the collect stage and of the release agent
  with 1,000,000 distinct keys of an open-domain stream in one slot, no broker
  (:mod:`app.tools.capacity.open_keys`).

They were ``dpstream bench throughput|recovery`` and ``scripts/readyz_overload.py``; they drive
the service, so they live beside it, not in the offline bench (which imports no ``app.stream``).
Like every verb, registering imports nothing heavy.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _broker(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker",
        default=os.environ.get("DPSTREAM_BROKER"),
        help="bootstrap servers (default $DPSTREAM_BROKER, else an embedded Tansu)",
    )
    parser.add_argument("--verbose", action="store_true", help="show the workers' stderr")


def register(sub: Any) -> None:
    capacity = sub.add_parser(
        "capacity",
        help="capacity benchmarks of the service on a real broker (throughput, recovery, "
        "overload, churn) and of one open-domain slot's worker path (open-keys)",
    )
    kinds = capacity.add_subparsers(dest="capacity_kind", metavar="KIND", required=True)

    throughput = kinds.add_parser(
        "throughput",
        help="CPU per event of the workers against bare consumer loops over a --users sweep; "
        "release latency; memory per open slot",
    )
    t = throughput.add_argument
    t("--events", type=int, default=300_000, help="events to push through (per --users value)")
    t("--users", type=_ints, default=[50_000], help="distinct users, or a sweep: 50000,200000")
    t("--slot-s", type=float, default=1.0, help="slot length in seconds")
    t("--workers", type=int, default=1, help="workers in one group (K)")
    t("--partitions", type=int, default=0, help="events partitions (default: topics/events.yaml)")
    t("--producers", type=int, default=1, help="producer processes")
    t("--linger-ms", type=float, help="the producers' linger.ms (default 100)")
    t("--idle-s", type=float, default=3.0, help="idle CPU measured this long")
    t("--rate", type=float, default=20_000, help="events/s of the latency phase")
    t("--latency-s", type=float, default=10.0, help="length of the latency phase (0: skip)")
    t("--timeout-s", type=float, default=180.0, help="give up after this")
    t("--skip-bare", action="store_true", help="skip the bare-client loops")
    _broker(throughput)
    from app.stream.cli import add_broker_timeout

    add_broker_timeout(throughput)
    throughput.set_defaults(func=_throughput)

    recovery = kinds.add_parser(
        "recovery",
        help="time for releases to come back after each kill -9 of the only worker; release "
        "delay over the storm",
    )
    r = recovery.add_argument
    r("--kills", type=int, default=5, help="kill -9s of the worker")
    r("--every-s", type=float, default=30.0, help="seconds between kills")
    r("--tail-s", type=float, default=30.0, help="run on after the last kill")
    r("--rate", type=float, default=2_000, help="events/s, the whole run")
    r("--users", type=int, default=10_000, help="distinct users")
    r("--slot-s", type=float, default=1.0, help="slot length in seconds")
    _broker(recovery)
    recovery.set_defaults(func=_recovery)

    overload = kinds.add_parser(
        "overload", help="/readyz latency and reasons while producers outrun one worker"
    )
    o = overload.add_argument
    o("--seconds", type=float, default=60.0, help="how long the producers run")
    o("--producers", type=int, default=2, help="producer processes at full speed")
    o("--poll-s", type=float, default=0.1, help="seconds between two /readyz questions")
    o("--json", type=Path, default=None, help="also write the figures to this file")
    overload.set_defaults(func=_overload)

    churn = kinds.add_parser(
        "churn",
        help="K workers on P partitions with members joining, leaving and timing out during "
        "ingest; counted == sent and verify clean",
    )
    c = churn.add_argument
    c("--workers", type=int, default=8, help="workers in the group at the start (K)")
    c("--partitions", type=int, default=16, help="events partitions")
    c("--events", type=int, default=200_000, help="events to send")
    c("--rate", type=float, default=4_000, help="events/s")
    c("--users", type=int, default=50_000, help="distinct users")
    c("--every-s", type=float, default=6.0, help="seconds between two membership changes")
    c("--slot-s", type=float, default=2.0, help="slot length in seconds")
    _broker(churn)
    churn.set_defaults(func=_churn)

    open_keys = kinds.add_parser(
        "open-keys",
        help="peak RSS and times of the collect stage and of the release agent with many "
        "distinct keys of an open-domain stream in one slot (no broker)",
    )
    k = open_keys.add_argument
    k("--keys", type=int, default=1_000_000, help="distinct keys, one user each")
    k("--key-chars", type=int, default=24, help="characters per key")
    k("--max-keys", type=int, default=1, help="the stream's max_keys")
    k("--batch", type=int, default=20_000, help="records per batch (a fetch)")
    k("--max-released-keys", type=int, default=128, help="the stream's release cap")
    k(
        "--hot-keys",
        type=int,
        default=None,
        help="keys sent by enough users to be selected (default: twice the release cap)",
    )
    open_keys.set_defaults(func=_open_keys)


def _throughput(args: argparse.Namespace) -> int:
    from app.stream.config import load_settings
    from app.stream.errors import ServiceError
    from app.stream.kafka import probe, probe_timeout_s
    from app.tools.capacity.throughput import run_throughput

    if args.broker:  # else an embedded broker, started by the bench
        try:
            settings = load_settings({**os.environ, "DPSTREAM_BROKER": args.broker})
            probe(settings, args.broker_timeout or probe_timeout_s())
        except ServiceError as exc:
            print(f"dpstream capacity throughput: {exc}", file=sys.stderr)
            return 2
    return run_throughput(args)


def _recovery(args: argparse.Namespace) -> int:
    from app.tools.capacity.recovery import run_recovery

    return run_recovery(args)


def _overload(args: argparse.Namespace) -> int:
    from app.tools.capacity.overload import run_overload

    return run_overload(args)


def _churn(args: argparse.Namespace) -> int:
    from app.tools.capacity.churn import run_churn

    return run_churn(args)


def _open_keys(args: argparse.Namespace) -> int:
    from app.tools.capacity.open_keys import run_open_keys

    return run_open_keys(args)
