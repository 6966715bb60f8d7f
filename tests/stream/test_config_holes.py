"""Issue 21, item 7: small configuration holes are refused with one line and exit 2, and the test
failpoint does nothing without its explicit guard."""

from __future__ import annotations

import os
import signal

import pytest

from app.cli import main
from app.stream import kafka
from app.stream.config import load_settings
from app.stream.errors import ConfigError
from app.stream.release import faults

KEY = "5a" * 32
LEVEL = "{name: std, w: 4, eps: 1.0}"


def stream_yaml(level: str = LEVEL, extra: str = "") -> str:
    return f"streams:\n  - id: s\n    d: 3\n    levels: [{level}]\n{extra}"


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("DPSTREAM_CONFIG", "DPSTREAM_NOISE_KEY_FILE", "DPSTREAM_METRICS_BIND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", KEY)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "test")
    monkeypatch.setenv("DPSTREAM_BROKER", "127.0.0.1:1")

    def no_probe(*_: object) -> None:
        raise AssertionError("probed the broker with a configuration that must be refused")

    monkeypatch.setattr(kafka, "probe", no_probe)
    return monkeypatch


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run the CLI, expect exit 2 and one line on stderr; return the line."""
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    return lines[0]


@pytest.mark.parametrize(
    ("level", "extra", "match"),
    [
        ("{name: std, w: 4, eps: '1.0'}", "", "eps must be a number, not the string '1.0'"),
        (LEVEL, "    release_timeout_s: 0\n", "release_timeout_s must be a finite number in [0.1"),
        (LEVEL, "    max_delay_s: 0\n", "max_delay_s must be a finite number in [0.1"),
    ],
    ids=["eps-string", "release-timeout-0", "max-delay-0"],
)
def test_issue_21_a_bad_stream_value_is_one_line_and_exit_2(
    worker_env, capsys, tmp_path, level, extra, match
):
    path = tmp_path / "streams.yaml"
    path.write_text(stream_yaml(level, extra))
    line = refused(capsys, ["worker", "--config", str(path)])
    assert line.startswith("dpstream worker: ") and match in line


@pytest.mark.parametrize("bind", ["999.1.1.1", "not a host", "host:9464", "-lead.example", ""])
def test_issue_21_an_invalid_metrics_bind_is_one_line_and_exit_2(
    worker_env, capsys, tmp_path, bind
):
    path = tmp_path / "streams.yaml"
    path.write_text(stream_yaml())
    worker_env.setenv("DPSTREAM_METRICS_BIND", bind)
    line = refused(capsys, ["worker", "--config", str(path)])
    assert line.startswith("dpstream worker: DPSTREAM_METRICS_BIND must be an IP address")


@pytest.mark.parametrize("bind", ["0.0.0.0", "127.0.0.1", "::", "fe80::1", "localhost", "w-0.svc"])
def test_a_valid_metrics_bind_is_kept(tmp_path, bind):
    path = tmp_path / "streams.yaml"
    path.write_text(stream_yaml())
    env = {"DPSTREAM_METRICS_BIND": bind, "DPSTREAM_NOISE_KEY": KEY, "DPSTREAM_DEPLOYMENT": "t"}
    assert load_settings(env=env, config=path).metrics_bind == bind


def test_the_bounds_just_above_zero_are_accepted(tmp_path):
    path = tmp_path / "streams.yaml"
    path.write_text(stream_yaml(extra="    release_timeout_s: 0.1\n    max_delay_s: 0.1\n"))
    (s,) = load_settings(
        env={"DPSTREAM_NOISE_KEY": KEY, "DPSTREAM_DEPLOYMENT": "t"}, config=path
    ).streams
    assert (s.release_timeout_s, s.max_delay_s) == (0.1, 0.1)
    path.write_text(stream_yaml(extra="    release_timeout_s: 0\n"))
    with pytest.raises(ConfigError, match="release_timeout_s"):
        load_settings(env={"DPSTREAM_NOISE_KEY": KEY, "DPSTREAM_DEPLOYMENT": "t"}, config=path)


@pytest.mark.parametrize("guard", [None, "", "0", "true", "yes"])
def test_issue_21_the_failpoint_does_nothing_without_its_guard(monkeypatch, tmp_path, guard):
    kills: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append((pid, sig)))
    marker = tmp_path / "killed"
    monkeypatch.setenv(faults.KILL_AFTER_PERIOD_RECORD, str(marker))
    if guard is None:
        monkeypatch.delenv(faults.FAILPOINTS, raising=False)
    else:
        monkeypatch.setenv(faults.FAILPOINTS, guard)
    faults.after_period_record()
    assert kills == [] and not marker.exists()


def test_the_failpoint_fires_once_with_its_guard(monkeypatch, tmp_path):
    kills: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: kills.append((pid, sig)))
    marker = tmp_path / "killed"
    monkeypatch.setenv(faults.KILL_AFTER_PERIOD_RECORD, str(marker))
    monkeypatch.setenv(faults.FAILPOINTS, "1")
    faults.after_period_record()
    faults.after_period_record()  # the marker makes it once per test, across restarts
    assert kills == [(os.getpid(), signal.SIGKILL)] and marker.exists()
