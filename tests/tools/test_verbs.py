"""User errors of the offline verbs are one line (exit 2); replay runs every local mechanism."""

from __future__ import annotations

import sys

import pytest

from app.cli import main
from app.dp.registry import names


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


def test_check_unknown_name_lists_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "nope"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "'nope'" in line and all(n in line for n in names())


def test_replay_unknown_name_lists_the_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "replay", "--mechanism", "nope"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "unknown mechanism 'nope'" in line and all(n in line for n in names())


@pytest.mark.parametrize("name", ["lpa", "lbd", "plbu", "plpa"])
def test_replay_runs_local_mechanisms_with_an_error_summary(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "replay", "--mechanism", name, "--slots", "5", "--users", "400", "--seed", "1"]
    assert main(argv) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    lines = out.out.strip().splitlines()
    assert sum(line.startswith("slot ") for line in lines) == 5
    assert lines[-1].startswith("error over 5 slots") and "MAE" in lines[-1] and "MRE" in lines[-1]


def test_replay_central_prints_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "replay", "--mechanism", "pba", "--slots", "4", "--users", "1000"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("error over 4 slots")


def test_replay_refuses_other_kinds_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    other = [n for n in names() if n not in names("central") + names("local")]
    if not other:
        pytest.skip("only central and local mechanisms are registered")
    assert main(["bench", "replay", "--mechanism", other[0]]) == 2
    assert "does not feed" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "argv", [["bench", "--quick", "--seeds", "1"], ["bench", "cost", "--quick"]]
)
def test_bench_checks_matplotlib_before_running(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import app.bench.engine.cost as cost
    import app.bench.engine.grid as grid

    def never(*_: object, **__: object) -> None:
        raise AssertionError("ran the benchmark before checking matplotlib")

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # find_spec: not installed
    monkeypatch.setattr(grid, "run_grid", never)
    monkeypatch.setattr(cost, "step_times", never)
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert "matplotlib" in line and ".[bench]" in line


def test_simulate_devices_unknown_stream_hints_at_config(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("DPSTREAM_CONFIG", raising=False)
    monkeypatch.setenv("DPSTREAM_BROKER", "127.0.0.1:1")
    assert main(["simulate", "devices", "--stream", "app-usage", "--duration", "1"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "no stream 'app-usage'" in line and "--config" in line


def test_capacity_throughput_probes_an_external_broker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import app.tools.capacity.throughput as throughput

    def never(*_: object) -> int:
        raise AssertionError("ran the benchmark without a broker")

    monkeypatch.setattr(throughput, "run_throughput", never)
    argv = ["capacity", "throughput", "--broker", "127.0.0.1:1", "--broker-timeout", "1"]
    assert main(argv) == 2
    assert "cannot reach the Kafka broker at 127.0.0.1:1" in one_line(capsys.readouterr().err)
