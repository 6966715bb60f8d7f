"""Fixtures of the deployment tests: the tools scripts/install-tools.sh installs, and helpers.

A missing tool fails the test (scripts/test.sh installs them first); it never skips.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app import metrics

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "dpstream"
TOOLS = ROOT / ".tools"
VENV_BIN = Path(sys.executable).parent
DASHBOARD = CHART / "dashboards" / "dpstream.json"
ALERTS = CHART / "files" / "alerts.yaml"
CI_VALUES = sorted((CHART / "ci").glob("*.yaml"))

_SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}


def tool(name: str) -> str:
    """Path of a tool from .tools/bin, the virtualenv or PATH; fails the test when absent."""
    for candidate in (TOOLS / "bin" / name, VENV_BIN / name):
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run scripts/install-tools.sh")
    return found


def run(*cmd: str, timeout: float = 60, check: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} -> rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def exposed_names() -> dict[str, str]:
    """Every sample name app.metrics can expose, mapped to its family name (Counter -> _total...)."""
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


@pytest.fixture(scope="session")
def metrics_target() -> Iterator[str]:
    """host:port of a process serving dpstream's /metrics on 127.0.0.1.

    Today: the stand-in (tests/deploy/standin_worker.py), which serves app.metrics.REGISTRY.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.deploy.standin_worker", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line.isdigit():
            pytest.fail(f"stand-in worker did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}")
        target = f"127.0.0.1:{line}"
        wait_for(lambda: "dpstream_" in http_get(f"http://{target}/metrics"), 10, "the stand-in's /metrics")
        yield target
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def live_families(metrics_target: str) -> dict[str, object]:
    """Metric families on the live /metrics, by family name."""
    text = http_get(f"http://{metrics_target}/metrics")
    return {f.name: f for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="session")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())
