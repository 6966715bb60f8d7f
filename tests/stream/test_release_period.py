"""Delayed releases on in-memory tables: a period mechanism (OptStream) behind the release
protocol releases each slot once, a whole period at its end, recorded before it is produced."""

from __future__ import annotations

import msgpack
import pytest

from app import metrics
from app.client.releases import decode_release
from app.stream.config import load_settings
from app.stream.errors import ConfigError
from app.stream.internal import Partial, Tick
from app.stream.release import LedgerEntry
from app.tools.releases import format_line
from tests.stream.agent import Boom, recording_agent, run

W = 4
FIRST = 9  # the first slot: a tick at 10.6 makes slot 9 (ends 10, due 10.5) the last closable
YAML = f"""
streams:
  - id: p
    labels: [a, b, c]
    slot_s: 1
    grace_s: 0.5
    release_timeout_s: 1
    mechanism: {{name: optstream, noise: laplace, params: {{k: 2, theta: 5.0}}}}
    accept_weaker_guarantee: true  # noise: laplace, the papers' float noise
    levels: [{{name: only, w: {W}, eps: 1.0}}]
"""


def make(tmp_path, ledger, slots, sent, fail_publish=False, yaml=YAML):
    return recording_agent(tmp_path / "p.yaml", yaml, ledger, slots, sent, fail_publish)


def feed(r, slot):
    """Slot ``slot``'s partial (the only partition's: it closes the slot at ``slot + 1.6``,
    past its due time, as a collect stage sends it), then a tick."""
    run(r, Partial("p", slot, 0, 1, [slot % 3, 2, slot % 5]).encode(), slot + 1.6)
    run(r, Tick("p", {0: slot + 1.6}, 1).encode(), slot + 1.7)


def releases(sent):
    return [msgpack.unpackb(v) for t, v in sent if t == "releases"]


def start(r):
    run(r, Tick("p", {0: 10.6}, 1).encode(), 10.6)  # releases nothing yet: slot 9 opens a period


def test_a_period_is_released_at_its_end_each_slot_once(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    start(r)
    assert releases(sent) == []
    seen = []
    for slot in range(FIRST + 1, FIRST + 3 * W):
        feed(r, slot)
        got = releases(sent)[len(seen) :]
        seen += got
        position = (slot - FIRST) % W  # 0 opens a period, W - 1 closes it
        if position < W - 1:
            assert got == [], f"slot {slot}: nothing before the period's end"
        else:
            # The whole period at once, in slot order, computed at the closing slot's step.
            assert [x["slot"] for x in got] == list(range(slot - W + 1, slot + 1))
            assert [x["delayed"] for x in got] == [True] * (W - 1) + [False]
            assert {x["released_at"] for x in got} == {slot + 1.6}
            assert all(x["mechanism"] == "optstream" and len(x["histogram"]) == 3 for x in got)
    assert [x["slot"] for x in seen] == list(range(FIRST, FIRST + 3 * W))
    audits = [msgpack.unpackb(v) for t, v in sent if t == "audit"]
    assert [a["slot"] for a in audits] == [x["slot"] for x in seen]
    assert [a["delayed"] for a in audits] == [x["delayed"] for x in seen]
    # Strict mode: eps/2 recorded at each period's first and last slot, nothing between.
    spent = [x["spent_by_group"]["only"] for x in seen]
    assert spent == [0.5, 0.0, 0.0, 0.5] * 3


def test_the_period_is_recorded_whole_before_any_slot_is_produced(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    start(r)
    for slot in range(FIRST + 1, FIRST + W - 1):
        feed(r, slot)
        entry = LedgerEntry.decode(ledger["p"])
        assert entry.outbox == [] and entry.published
        assert entry.next_slot == slot + 1
        assert len(entry.state["state"]["buffer"]) == slot - FIRST + 1  # the open period
    broken = make(tmp_path, ledger, slots, sent, fail_publish=True)
    with pytest.raises(Boom):
        feed(broken, FIRST + W - 1)  # the period's end: recorded, then the broker fails
    entry = LedgerEntry.decode(ledger["p"])
    assert not entry.published
    assert [role for role, _ in entry.outbox] == ["releases", "audit"] * W
    stored = [v for role, v in entry.outbox if role == "releases"]
    assert [msgpack.unpackb(v)["slot"] for v in stored] == list(range(FIRST, FIRST + W))
    assert releases(sent) == []
    # A restart re-produces the stored bytes first, then goes on with the next period.
    restarted = make(tmp_path, ledger, slots, sent)
    run(restarted, Tick("p", {0: FIRST + W + 0.6}, 1).encode(), 30.0)
    assert [v for t, v in sent if t == "releases"] == stored
    assert LedgerEntry.decode(ledger["p"]).published


def test_a_restart_in_the_middle_of_a_period_releases_the_same_bytes(tmp_path):
    def whole_run(crash_after: int | None):
        ledger, slots, sent = {}, {}, []
        r = make(tmp_path, ledger, slots, sent)
        start(r)
        for slot in range(FIRST + 1, FIRST + 2 * W):
            if slot == crash_after:  # a new process: no cached mechanism, the ledger only
                r = make(tmp_path, ledger, slots, sent)
            feed(r, slot)
        return [v for t, v in sent if t == "releases"]

    uninterrupted = whole_run(None)
    assert len(uninterrupted) == 2 * W
    assert whole_run(FIRST + 2) == uninterrupted  # in the middle of the first period
    assert whole_run(FIRST + W) == uninterrupted  # on the second period's first slot


def test_the_gauges_follow_what_was_released_not_what_was_stepped(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    start(r)
    for slot in range(FIRST + 1, FIRST + W):
        feed(r, slot)
    before = sample("dpstream_release_latency_seconds_count")
    last = FIRST + W - 1
    assert metrics.LAST_RELEASED_SLOT.labels("p")._value.get() == last
    for slot in range(FIRST + W, FIRST + 2 * W - 1):
        feed(r, slot)  # inside the second period: the gauge stays at the last released slot
        assert metrics.LAST_RELEASED_SLOT.labels("p")._value.get() == last
    assert sample("dpstream_release_latency_seconds_count") == before
    feed(r, FIRST + 2 * W - 1)
    assert sample("dpstream_release_latency_seconds_count") == before + W


def sample(name: str) -> float:
    for family in metrics.REGISTRY.collect():
        for s in family.samples:
            if s.name == name and s.labels.get("stream") == "p":
                return float(s.value)
    return 0.0


@pytest.mark.parametrize(
    ("mechanism", "mode", "error"),
    [
        ("{name: optstream, noise: laplace}", "central", None),
        ("{name: dft, noise: laplace}", "central", None),
        ("{name: optstream}", "central", None),  # issue 21: geometric by default
        ("{name: optstream, noise: laplace, params: {users: 9}}", "local", "must be one of"),
    ],
)
def test_central_streams_accept_period_mechanisms(tmp_path, mechanism, mode, error):
    path = tmp_path / "c.yaml"
    extra = "round_s: 0.1\n    slot_s: 10\n    " if mode == "local" else ""
    path.write_text(
        f"streams:\n  - id: c\n    mode: {mode}\n    {extra}labels: [a, b]\n"
        f"    mechanism: {mechanism}\n    levels: [{{name: l, w: 4, eps: 1.0}}]\n"
        f"    accept_weaker_guarantee: {'laplace' in mechanism}\n"
    )
    env = {"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}
    if error is None:
        (stream,) = load_settings(env=env, config=path).streams
        assert stream.build_mechanism().kind == "period"
    else:
        with pytest.raises(ConfigError, match=error):
            load_settings(env=env, config=path)


def test_readers_see_the_delay(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    start(r)
    for slot in range(FIRST + 1, FIRST + W):
        feed(r, slot)
    got = [decode_release(v) for t, v in sent if t == "releases"]
    assert [(x.slot, x.delayed) for x in got] == [(FIRST + i, i < W - 1) for i in range(W)]
    first = got[0]
    assert first.released_at - first.end == pytest.approx(W - 1 + 0.6)  # W - 1 slots held back
    assert "(delayed to 4 s after its end)" in format_line(first)
    assert "delayed" not in format_line(got[-1])
