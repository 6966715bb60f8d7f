"""``dpstream ledger show --json / --watch``: the budget view of a ledger the releaser wrote."""

from __future__ import annotations

import asyncio
import json

import msgpack
import pytest

from app.stream.config import load_settings
from app.stream.internal import Partial, Tick
from app.stream.ops import ledger_view
from app.stream.release import LedgerEntry, Releaser
from tests.stream.agent import sized_topics

YAML = """
streams:
  - id: cen
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    release_timeout_s: 1
    mechanism: {name: pba}
    levels: [{name: strict, w: 4, eps: 1.0}, {name: loose, w: 2, eps: 2.0}]
"""


@pytest.fixture
def written(tmp_path):
    """Stream ``cen`` (two levels, 1 s slots) after slots 9..14; its settings and entry."""
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    settings = load_settings(
        env={"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}, config=path
    )
    ledger: dict[str, bytes] = {}
    now = [0.0]

    async def produce(topic, key, value):
        return None

    async def persist():
        return None

    r = Releaser(settings, sized_topics(), ledger, {}, produce, persist, clock=lambda: now[0])
    for raw, at in [
        (Tick("cen", {0: 10.6}, 1).encode(), 10.6),
        (Partial("cen", 10, 0, 1, [30, 2, 5, 9]).encode(), 11.6),
        (Tick("cen", {0: 15.6}, 1).encode(), 15.7),
    ]:
        now[0] = at
        asyncio.run(r.on_message(raw))
    return settings, LedgerEntry.decode(ledger["cen"])


def test_json_matches_the_audit_record_and_names_times(written):
    settings, entry = written
    view = ledger_view.to_json(settings.stream("cen"), entry)
    audit = msgpack.unpackb(dict(entry.outbox)["audit"])
    assert view["last_slot"] == audit["slot"] == 14
    assert view["last_slot_start_utc"] == "1970-01-01T00:00:14Z"
    for level in view["levels"]:
        name = level["level"]
        assert level["window_spent"] == audit["window_spent_by_group"][name]
        assert level["window_spent_exact"] == audit["window_spent_exact_by_group"][name]
        assert level["window_first_slot"] == 14 - level["w"] + 1
    assert [r["slot"] for r in view["recent"]] == list(range(9, 15))
    assert view["recent"][0]["start_utc"] == "1970-01-01T00:00:09Z"
    json.dumps(view)  # plain values only


def test_watch_prints_json_lines_until_interrupted(written, monkeypatch, capsys):
    settings, entry = written
    monkeypatch.setattr(ledger_view, "read_ledger", lambda *a, **k: entry)
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        if len(sleeps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(ledger_view.time, "sleep", sleep)
    with pytest.raises(KeyboardInterrupt):
        ledger_view.watch(settings, settings.stream("cen"), 1.0, as_json=True, every_s=3)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and sleeps == [3, 3]
    assert all(json.loads(line)["stream"] == "cen" for line in lines)


def test_watch_text_has_a_time_line_and_no_escape_codes_when_piped(written, monkeypatch, capsys):
    settings, entry = written
    monkeypatch.setattr(ledger_view, "read_ledger", lambda *a, **k: entry)

    def sleep(s: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ledger_view.time, "sleep", sleep)
    with pytest.raises(KeyboardInterrupt):
        ledger_view.watch(settings, settings.stream("cen"), 1.0, as_json=False, every_s=2)
    out = capsys.readouterr().out
    assert out.startswith("-- ") and "(every 2 s; Ctrl-C stops)" in out
    assert "\x1b" not in out
    assert "1970-01-01T00:00:14Z" in out  # the recent releases' start times


def test_once_without_a_ledger_is_exit_1(written, monkeypatch, capsys):
    settings, _ = written
    monkeypatch.setattr(ledger_view, "read_ledger", lambda *a, **k: None)
    assert ledger_view.watch(settings, settings.stream("cen"), 1.0, False, 0) == 1
    assert "no ledger for stream 'cen' yet" in capsys.readouterr().err
