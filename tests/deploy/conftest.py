"""Fixtures of the deployment tests: the tools scripts/install-tools.sh installs, and helpers.

A missing tool fails the test (scripts/test.sh installs them first); it never skips.

The live worker (its broker) and the Prometheus that scrapes it are per test file: four files
read them, and a session-wide one, made by each process that runs one of those files, went on
taking a tenth of a core per process (1 s slots, a scrape and a rule evaluation a second)
until the whole suite had ended.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app import metrics
from app.stream.collect.partitioning import PRODUCER_CONFIG

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "dpstream"
TOOLS = ROOT / ".tools"
VENV_BIN = Path(sys.executable).parent
DASHBOARD = CHART / "dashboards" / "dpstream.json"
ALERTS = CHART / "files" / "alerts.yaml"
COMPOSE_STREAMS = ROOT / "deploy" / "compose" / "streams.yaml"
NOISE_KEY_INIT = ROOT / "deploy" / "compose" / "noise-key-init.py"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
}


def tool(name: str) -> str:
    """Path of a tool from .tools/bin, the virtualenv or PATH; fails the test when absent."""
    for candidate in (TOOLS / "bin" / name, VENV_BIN / name):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run scripts/install-tools.sh")
    return found


def run(
    *cmd: str, timeout: float = 60, check: bool = True, **kw: object
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} -> rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def exposed_names() -> dict[str, str]:
    """Every sample name app.metrics can expose, mapped to its family (Counter: ``_total``...)."""
    names: dict[str, str] = {}
    for family in metrics.REGISTRY.collect():  # a family shows even before it has samples
        for suffix in _SUFFIXES.get(family.type, ("",)):
            names[family.name + suffix] = family.name
    return names


def metric_names_in(expr: str) -> set[str]:
    """The dpstream_* metric names a PromQL expression mentions."""
    return set(re.findall(r"\bdpstream_[A-Za-z0-9_]+", expr))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - 127.0.0.1 only
        return resp.read().decode()


def wait_for(predicate, timeout: float, what: str, interval: float = 0.25):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except OSError as exc:  # not listening yet
            last = exc
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def stop(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@dataclass(frozen=True)
class LiveWorker:
    """A running ``dpstream worker`` (the console entry point) on an embedded broker."""

    target: str  # host:port of /metrics, /healthz, /readyz
    bootstrap: str
    prefix: str
    stream: str

    def produce(self, items: list[tuple[bytes, bytes]]) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {"bootstrap.servers": self.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG}
        )
        for key, value in items:
            producer.produce(self.prefix + "events", key=key, value=value)
        assert producer.flush(30) == 0


@pytest.fixture(scope="module")
def live_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveWorker]:
    """A real worker, configured like the compose stack (its streams file, a noise key made by
    its init script) with 1 s slots, consuming from a Tansu broker on 127.0.0.1; some events
    already released."""
    from app.stream.broker import EmbeddedBroker
    from app.stream.topics import create_topics, load_topics

    work = tmp_path_factory.mktemp("live-worker")
    streams = yaml.safe_load(COMPOSE_STREAMS.read_text())["streams"]
    stream = streams[0]["id"]
    key = re.sub(r"[^A-Z0-9]", "_", stream.upper())
    prefix, port = "deploy.", free_port()
    # The noise key as the compose stack makes it: its one-shot init script, on first start.
    key_file = work / "key" / "noise-key"
    key_file.parent.mkdir()
    run(sys.executable, str(NOISE_KEY_INIT), str(key_file))
    broker = EmbeddedBroker(log_path=work / "tansu.log").start()
    proc = None
    log = (work / "worker.log").open("wb")
    try:
        create_topics(load_topics(prefix), {"bootstrap.servers": broker.bootstrap})
        env = {
            **os.environ,
            "DPSTREAM_BROKER": broker.bootstrap,
            "DPSTREAM_CONFIG": str(COMPOSE_STREAMS),
            "DPSTREAM_NOISE_KEY_FILE": str(key_file),
            "DPSTREAM_DEPLOYMENT_FILE": str(key_file.with_name("deployment-id")),
            "DPSTREAM_STATE_DIR": str(work / "state"),
            "DPSTREAM_METRICS_PORT": str(port),
            "DPSTREAM_METRICS_BIND": "127.0.0.1",
            "DPSTREAM_TOPIC_PREFIX": prefix,
            "DPSTREAM_SESSION_TIMEOUT_S": "6",
            f"DPSTREAM_STREAM_{key}_SLOT_S": "1",
            f"DPSTREAM_STREAM_{key}_GRACE_S": "0.2",
            f"DPSTREAM_STREAM_{key}_RELEASE_TIMEOUT_S": "0.2",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.stream", "worker"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        target = f"127.0.0.1:{port}"

        def ready() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"worker exited; see {work / 'worker.log'}")
            try:
                return http_get(f"http://{target}/readyz", timeout=2) is not None
            except urllib.error.HTTPError:
                return False

        wait_for(ready, 90, f"the worker's /readyz (log: {work / 'worker.log'})")
        live = LiveWorker(target, broker.bootstrap, prefix, stream)
        now = time.time()
        live.produce(
            [
                (
                    f"u{u}".encode(),
                    msgpack.packb({"stream": stream, "user": f"u{u}", "ts": now, "value": u % 3}),
                )
                for u in range(50)
            ]
        )
        wait_for(
            lambda: "dpstream_releases_total{" in http_get(f"http://{target}/metrics"),
            30,
            "a first release",
        )
        yield live
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        log.close()
        broker.stop()


@pytest.fixture(scope="module")
def metrics_target(live_worker: LiveWorker) -> str:
    """host:port of the live worker's /metrics."""
    return live_worker.target


@pytest.fixture(scope="module")
def live_families(metrics_target: str) -> dict[str, object]:
    """Metric families on the live /metrics, by family name."""
    text = http_get(f"http://{metrics_target}/metrics")
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def prometheus(metrics_target: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real Prometheus on 127.0.0.1 that scrapes ``metrics_target`` every second.

    Its configuration is deploy/prometheus/prometheus.yml (the compose stack's) with the
    intervals shortened and the dpstream job pointed at the target; the alert rules are
    charts/dpstream/files/alerts.yaml in rules/, as compose mounts them.
    """
    workdir = tmp_path_factory.mktemp("prometheus")
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    config["global"] = {
        "scrape_interval": "1s",
        "evaluation_interval": "1s",
        "scrape_timeout": "1s",
    }
    port = free_port()
    for job in config["scrape_configs"]:
        target = metrics_target if job["job_name"] == "dpstream" else f"127.0.0.1:{port}"
        job["static_configs"] = [{"targets": [target]}]
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    (workdir / "rules").mkdir()
    shutil.copy(ALERTS, workdir / "rules" / "dpstream-alerts.yaml")
    log = (workdir / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            tool("prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: proc.poll() is None and "Ready" in http_get(f"{base}/-/ready"),
            30,
            f"Prometheus to be ready (log: {workdir / 'prometheus.log'})",
        )
        yield base
    finally:
        stop(proc)
        log.close()


def prom_query(base: str, expr: str) -> list[dict]:
    """Instant query; fails the test on a PromQL error."""
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        body = json.loads(http_get(url))
    except urllib.error.HTTPError as exc:
        pytest.fail(f"query {expr!r} failed: {exc.read().decode()}")
    assert body["status"] == "success", body
    return body["data"]["result"]  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())
