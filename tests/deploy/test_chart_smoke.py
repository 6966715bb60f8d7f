"""The chart's `helm test` hook: it renders with the worker's settings but not its noise key,
its commands are real ``dpstream`` commands, and the script it runs reads one release through
Kafka from a live deployment (here ``dpstream demo``, whose embedded broker stands in for the
cluster's Kafka)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import CHART, CI_VALUES, run, tool

HOOK = "templates/tests/smoke-test.yaml"


def _hook(*extra: str) -> dict:
    out = run(tool("helm"), "template", "rel", str(CHART), "--show-only", HOOK, *extra).stdout
    return yaml.safe_load(out)


def _script(pod: dict) -> str:
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["sh", "-c"]
    return container["args"][0]


def test_the_hook_is_a_helm_test_with_the_worker_settings_but_no_noise_key() -> None:
    pod = _hook()
    assert pod["kind"] == "Pod" and pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["activeDeadlineSeconds"] > 0
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["DPSTREAM_BROKER"] == "kafka:9092" and env["SMOKE_STREAM"] == "page-views"
    assert "DPSTREAM_NOISE_KEY_FILE" not in env and "DPSTREAM_NOISE_KEY" not in env
    assert all("noise" not in v["name"] for v in pod["spec"]["volumes"])
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/etc/dpstream/config"}


def test_the_hook_runs_real_dpstream_commands() -> None:
    from app.cli import parse

    commands = [c.strip() for c in re.split(r"[;&]", _script(_hook())) if "dpstream" in c]
    verbs = []
    for command in commands:
        argv = shlex.split(command.replace('"$SMOKE_STREAM"', "page-views"))[1:]
        args = parse(argv)
        verbs.append(args.func.__name__)
    assert verbs == ["_produce", "_releases_tail"]
    assert "--count 1" in commands[1]


def test_the_hook_needs_a_stream_with_an_external_streams_file() -> None:
    bad = run(
        tool("helm"), "template", "rel", str(CHART), "--set", "existingConfigmap=x", check=False
    )
    assert bad.returncode != 0 and "smokeTest.stream is required" in bad.stderr
    for values in CI_VALUES:
        run(tool("helm"), "template", "rel", str(CHART), "-f", str(values))


def test_notes_tell_how_to_run_it() -> None:
    notes = run(
        tool("helm"), "install", "rel", str(CHART), "--dry-run=client", "--namespace", "dp"
    ).stdout
    assert "helm test rel --namespace dp --logs" in notes
    off = run(
        tool("helm"),
        "install",
        "rel",
        str(CHART),
        "--dry-run=client",
        "--set",
        "smokeTest.enabled=false",
    ).stdout
    assert "helm test" not in off


@pytest.mark.integration
def test_the_hook_script_reads_one_release_from_a_live_deployment() -> None:
    """The script as rendered, in the demo's environment: it exits 0 once one release of the
    stream came through the broker, and stops its producer."""
    from tests.tools.live_demo import running_demo

    script = _script(_hook("--set", "smokeTest.rate=50"))
    with running_demo() as env:
        bin_dir = str(Path(sys.executable).parent)
        done = subprocess.run(  # noqa: S603 - the chart's own script
            ["sh", "-c", script],  # noqa: S607
            env={**env, "SMOKE_STREAM": "clicks", "PATH": f"{bin_dir}:{env['PATH']}"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-1000:]
    assert re.match(r"clicks \d+ \d\d:\d\d:\d\dZ (fresh|repeat)", done.stdout)
    assert done.stdout.count("\n") == 1 and "Traceback" not in done.stderr
