"""Issue 21 items 4 and 5 on the service: period streams run the safe noise unless a stream
names ``laplace`` with ``accept_weaker_guarantee`` (then the worker warns), and settings that
are not w-event private are refused with one line and exit 2 unless the stream accepts the
weaker guarantee, which its audit records, ``/budget`` and the status page then show."""

from __future__ import annotations

import logging

import msgpack
import pytest

from app.cli import main
from app.stream.cli import warn_streams
from app.stream.config import load_settings
from app.stream.ops import status
from app.stream.ops.budget_view import budget_json
from tests.stream.test_release_period import FIRST, W, feed, make, releases, start

KEY = {"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}


def period_yaml(mechanism: str, extra: str = "") -> str:
    return (
        "streams:\n  - id: p\n    labels: [a, b, c]\n    slot_s: 1\n    grace_s: 0.5\n"
        f"    release_timeout_s: 1\n    mechanism: {mechanism}\n{extra}"
        f"    levels: [{{name: only, w: {W}, eps: 1.0}}]\n"
    )


def load(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_settings(env=KEY, config=path).streams


@pytest.mark.parametrize("name", ["optstream", "optstream_h", "dft", "pegasus"])
def test_a_period_stream_without_noise_runs_the_safe_noise(tmp_path, name):
    (stream,) = load(tmp_path, period_yaml(f"{{name: {name}}}"))
    assert stream.noise == "geometric" and stream.warnings == ()
    assert stream.build_mechanism().noise == "geometric"


def test_a_period_stream_without_noise_releases_through_the_agent(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent, yaml=period_yaml("{name: optstream, params: {k: 2}}"))
    start(r)
    for slot in range(FIRST + 1, FIRST + 2 * W):
        feed(r, slot)
    assert [x["slot"] for x in releases(sent)] == list(range(FIRST, FIRST + 2 * W))
    audits = [msgpack.unpackb(v) for t, v in sent if t == "audit"]
    assert {a["weaker_guarantee"] for a in audits} == {None}


def test_laplace_runs_only_with_the_flag_and_the_worker_warns(tmp_path, caplog):
    flag = "    accept_weaker_guarantee: true\n"
    (stream,) = load(tmp_path, period_yaml("{name: dft, noise: laplace}", flag))
    assert stream.build_mechanism().noise == "laplace"
    assert "noise: laplace" in (stream.weaker_guarantee or "")
    with caplog.at_level(logging.WARNING, logger="app.stream.worker"):
        warn_streams([stream], logging.getLogger("app.stream.worker"))
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and "noise: laplace" in record.getMessage()
    assert "stream=p" in record.getMessage()


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ("{strict: false}", "strict=False"),
        ("{k: 2, feature_sensitivity: paper}", "feature_sensitivity=paper"),
    ],
)
def test_a_setting_that_is_not_w_event_private_is_refused_with_exit_2(
    tmp_path, monkeypatch, capsys, params, reason
):
    path = tmp_path / "s.yaml"
    path.write_text(period_yaml(f"{{name: optstream, params: {params}}}"))
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", "cd" * 16)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "test")
    monkeypatch.setenv("DPSTREAM_BROKER", "127.0.0.1:1")
    monkeypatch.setenv("DPSTREAM_BROKER_TIMEOUT_S", "1")
    assert main(["worker", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "not w-event private" in err and reason in err and "accept_weaker_guarantee" in err


def test_strict_false_is_harmless_where_no_window_straddles_periods(tmp_path):
    (stream,) = load(tmp_path, period_yaml("{name: pegasus, params: {strict: false}}"))
    assert stream.weaker_guarantee is None


def test_accept_weaker_guarantee_must_be_a_boolean(tmp_path, monkeypatch, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(period_yaml("dft", "    accept_weaker_guarantee: 'yes'\n"))
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", "cd" * 16)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "test")
    assert main(["worker", "--config", str(path)]) == 2
    assert "accept_weaker_guarantee must be true or false" in capsys.readouterr().err


def test_an_accepted_weaker_guarantee_shows_in_audit_budget_and_status(tmp_path, caplog):
    text = period_yaml(
        "{name: optstream, params: {k: 2, strict: false}}", "    accept_weaker_guarantee: true\n"
    )
    (stream,) = load(tmp_path, text)
    assert stream.weaker_guarantee and "strict=False" in stream.weaker_guarantee
    with caplog.at_level(logging.WARNING, logger="app.stream.worker"):
        warn_streams([stream], logging.getLogger("app.stream.worker"))
    assert any("not w-event private, accepted" in r.getMessage() for r in caplog.records)
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent, yaml=text)
    start(r)
    for slot in range(FIRST + 1, FIRST + W):
        feed(r, slot)
    audits = [msgpack.unpackb(v) for t, v in sent if t == "audit"]
    assert len(audits) == W
    assert all(a["weaker_guarantee"] == stream.weaker_guarantee for a in audits)
    mech = stream.build_mechanism()
    assert budget_json(stream, mech.window_report(), None)["weaker_guarantee"] == (
        stream.weaker_guarantee
    )
    board = status.StatusBoard()
    board.on_report(stream, mech.window_report(), [])
    assert "Not w-event private" in board.render_page()
