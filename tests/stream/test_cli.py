"""The service verbs fail fast and plainly: one line, exit code 2, never a traceback.

The unreachable broker is ``127.0.0.1:1`` (nothing listens on port 1: connection refused at
once), probed with a 1 s bound, so each test takes about a second.
"""

from __future__ import annotations

import time

import pytest

from app.cli import main
from app.stream import kafka
from app.stream.config import load_settings
from app.stream.errors import BrokerUnreachable, ConfigError

NOWHERE = "127.0.0.1:1"
KEY = "5a" * 32


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("DPSTREAM_CONFIG", "DPSTREAM_NOISE_KEY", "DPSTREAM_NOISE_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DPSTREAM_BROKER", NOWHERE)
    monkeypatch.setenv("DPSTREAM_BROKER_TIMEOUT_S", "1")
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "test")
    return monkeypatch


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def test_probe_names_the_address_and_the_cause_within_its_bound() -> None:
    settings = load_settings({"DPSTREAM_BROKER": NOWHERE})
    started = time.monotonic()
    with pytest.raises(BrokerUnreachable) as info:
        kafka.probe(settings, timeout_s=1.0)
    assert time.monotonic() - started < 5.0
    assert info.value.address == NOWHERE
    text = str(info.value)
    assert text.startswith(f"cannot reach the Kafka broker at {NOWHERE}: ")
    assert "Connection refused" in text and text.endswith("set DPSTREAM_BROKER")


@pytest.mark.parametrize(
    ("value", "expected"), [("", kafka.PROBE_TIMEOUT_S), ("2.5", 2.5), (" 3 ", 3.0)]
)
def test_probe_timeout_from_the_environment(value: str, expected: float) -> None:
    assert kafka.probe_timeout_s({"DPSTREAM_BROKER_TIMEOUT_S": value}) == expected


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_probe_timeout_is_a_config_error(value: str) -> None:
    with pytest.raises(ConfigError, match="DPSTREAM_BROKER_TIMEOUT_S"):
        kafka.probe_timeout_s({"DPSTREAM_BROKER_TIMEOUT_S": value})


def test_worker_checks_the_noise_key_before_the_broker(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_probe(*_: object) -> int:
        raise AssertionError("probed the broker before checking the noise key")

    env.setattr(kafka, "probe", no_probe)
    assert main(["worker"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("dpstream worker: no noise key")


def test_worker_refuses_an_unreachable_broker_before_running(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import app.stream.worker as worker

    def no_run(*_: object) -> int:
        raise AssertionError("ran the worker without a broker")

    env.setenv("DPSTREAM_NOISE_KEY", KEY)
    env.setattr(worker, "run", no_run)
    assert main(["worker"]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"dpstream worker: cannot reach the Kafka broker at {NOWHERE}")


def test_worker_config_error_is_one_line(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    bad = tmp_path / "streams.yaml"
    bad.write_text("streams: [{id: x}]\n")
    env.setenv("DPSTREAM_NOISE_KEY", KEY)
    assert main(["worker", "--config", str(bad)]) == 2
    assert one_line(capsys.readouterr().err).startswith("dpstream worker: ")


@pytest.mark.parametrize(
    ("argv", "verb"),
    [(["topics", "create"], "topics create"), (["ledger", "show", "-s", "clicks"], "ledger show")],
)
def test_broker_verbs_fail_fast(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str], verb: str
) -> None:
    started = time.monotonic()
    assert main(argv) == 2
    assert time.monotonic() - started < 10.0
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"dpstream {verb}: cannot reach the Kafka broker at {NOWHERE}")


def test_broker_timeout_flag_wins_over_the_environment(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[float] = []

    def fake_probe(_settings: object, timeout_s: float) -> int:
        seen.append(timeout_s)
        raise BrokerUnreachable(NOWHERE, "test")

    env.setattr(kafka, "probe", fake_probe)
    assert main(["topics", "create", "--broker-timeout", "0.5"]) == 2
    assert main(["topics", "create"]) == 2
    assert seen == [0.5, 1.0]


def test_ledger_show_unknown_stream_is_one_line(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["ledger", "show", "--stream", "nope"]) == 2
    assert "no stream 'nope'" in one_line(capsys.readouterr().err)
