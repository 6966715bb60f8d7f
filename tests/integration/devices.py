"""Simulated devices for the local-mode tests (LPA, PLDP): start, stop, read them back.

:func:`start_devices` runs ``dpstream simulate devices`` against the suite's broker,
:func:`stop_devices` ends it, :func:`device_stats` reads the counters of its last log line.
:class:`Tail` records ``collection-requests`` as they arrive, for :func:`kill9_in_rounds` to
kill the worker at moments tied to a request. :func:`check_reports` states the population
ledger's rule on what the devices sent.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def start_devices(
    broker: Any,
    config: Path,
    prefix: str,
    stream: str,
    devices: int,
    seed: int,
    seconds: int,
    log_path: Path,
) -> subprocess.Popen[bytes]:
    """Start ``devices`` simulated devices of ``stream`` for ``seconds``, logging to
    ``log_path`` (in a session of their own, for :func:`stop_devices`)."""
    env = {
        **os.environ,
        "DPSTREAM_BROKER": broker.bootstrap,
        "DPSTREAM_CONFIG": str(config),
        "DPSTREAM_TOPIC_PREFIX": prefix,
    }
    with open(log_path, "wb") as log:
        return subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [
                sys.executable,
                "-m",
                "app.cli",
                "simulate",
                "devices",
                "--stream",
                stream,
                "--devices",
                str(devices),
                "--seed",
                str(seed),
                "--duration",
                str(seconds),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_devices(sim: subprocess.Popen[bytes]) -> None:
    """SIGTERM the simulator (it prints its counters), SIGKILL its session if it hangs."""
    if sim.poll() is None:
        sim.send_signal(signal.SIGTERM)
    try:
        sim.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(sim.pid, signal.SIGKILL)
        sim.wait(5)


def device_stats(text: str) -> dict[str, int]:
    """The simulator's counters (``key=value`` on its last line, the stream name left out)."""
    fields = (kv.split("=") for kv in text.strip().splitlines()[-1].split()[1:])
    return {k: int(v) for k, v in fields if k != "stream"}


def check_reports(
    reports: list[dict[str, Any]], asked: dict[tuple[int, str], np.ndarray], w: int
) -> dict[int, list[int]]:
    """Assert that every report answers a request that asked its user (``asked``: the user
    mask per (slot, round)) and that no user reported twice within ``w`` slots; the slots
    each user reported in."""
    by_user: dict[int, list[int]] = defaultdict(list)
    for rep in reports:
        assert asked[rep["slot"], rep["round"]][rep["user"]], rep
        by_user[rep["user"]].append(rep["slot"])
    for user, user_slots in by_user.items():
        s = np.sort(user_slots)
        assert (np.diff(s) >= w).all(), (user, s.tolist())
    return by_user


class Tail:
    """A thread that records every ``collection-requests`` value as it arrives."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.values: list[bytes] = []
        self.stop = threading.Event()
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, args=(bootstrap, topic), daemon=True)
        self.thread.start()

    def _run(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"tail-{time.time_ns()}",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 20,
            }
        )
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            while not self.stop.is_set():
                msg = c.poll(0.05)
                if msg is None or msg.error() or msg.value() is None:
                    continue
                with self.cond:
                    self.values.append(msg.value() or b"")
                    self.cond.notify_all()
        finally:
            c.close()

    def wait_new(self, timeout_s: float) -> bool:
        """Wait for a request newer than the ones seen so far."""
        with self.cond:
            n = len(self.values)
            return self.cond.wait_for(lambda: len(self.values) > n, timeout_s)


def kill9_in_rounds(
    worker: Any, tail: Tail, rnd: random.Random, kills: int, round_s: float
) -> list[float]:
    """Kill -9 the worker ``kills`` times, each after a new request, and restart it on the
    same state; the delays after the request (seconds)."""
    moments = []
    for i in range(kills):
        assert tail.wait_new(20), f"no request within 20 s\n{worker.tail()}"
        # Even kills: right after the request was produced (maybe before it is marked
        # sent); odd kills: inside the round, while devices answer and reports are tallied.
        delay = rnd.uniform(0.0, 0.05) if i % 2 == 0 else rnd.uniform(0.15, round_s)
        time.sleep(delay)
        worker.kill9()
        moments.append(round(delay, 3))
        worker.start()
        worker.wait_ready(60)
    return moments
