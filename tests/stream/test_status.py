"""The status page and budget view fed by the real release protocol (in-memory tables)."""

from __future__ import annotations

import asyncio
import json
import re

import msgpack
import pytest

from app import metrics
from app.stream.config import load_settings
from app.stream.internal import Partial, Tick
from app.stream.ops import status
from app.stream.ops.late import LateSlots
from app.stream.release import LedgerEntry, Releaser
from tests.stream.agent import sized_topics

YAML = """
streams:
  - id: web
    labels: [news, sport, video]
    slot_s: 1
    grace_s: 0.5
    release_timeout_s: 1
    mechanism: {name: pba}
    levels: [{name: strict, w: 4, eps: 1.0}, {name: relaxed, w: 2, eps: 2.0}]
"""


@pytest.fixture
def released(tmp_path):
    """Slots 9..20 of stream ``web`` released by the real agent; returns the ledger and the
    published ``releases`` values and the status board that listened."""
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    settings = load_settings(
        env={"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}, config=path
    )
    ledger: dict = {}
    sent: list[bytes] = []
    now = [0.0]

    async def produce(topic, key, value):
        if topic == "releases":
            sent.append(value)

    async def persist():
        return None

    board = status.StatusBoard()
    r = Releaser(
        settings,
        sized_topics(),
        ledger,
        {},
        produce,
        persist,
        clock=lambda: now[0],
        listeners=[board],
    )

    def run(raw, at):
        now[0] = at
        asyncio.run(r.on_message(raw))

    run(Tick("web", {0: 10.6}, 1).encode(), 10.6)
    for slot in range(10, 21):
        run(Partial("web", slot, 0, 1, [40 + slot, 3, 20, 5, 5, 5 + slot % 3]).encode(), slot + 0.7)
        run(Tick("web", {0: slot + 1.6}, 1).encode(), slot + 1.6)
    yield ledger, sent, board


def test_budget_is_the_ledgers_window(released):
    ledger, sent, board = released
    doc = json.loads(asyncio.run(board.budget(None)).text)  # type: ignore[arg-type]
    (web,) = doc["streams"]
    assert web["stream"] == "web" and web["last_slot"] == msgpack.unpackb(sent[-1])["slot"]
    entry = LedgerEntry.decode(ledger["web"])
    audit = [msgpack.unpackb(v) for role, v in entry.outbox if role == "audit"][0]
    for level in web["levels"]:
        assert level["window_spent"] == audit["window_spent_by_group"][level["level"]]
        assert level["window_spent_exact"] == audit["window_spent_exact_by_group"][level["level"]]
        assert level["eps"] == audit["eps_by_group"][level["level"]]
        assert level["window_end_utc"] == web["last_slot_end_utc"]


def test_page_shows_the_last_releases_fresh_and_repeated(released):
    _, sent, board = released
    records = [msgpack.unpackb(v) for v in sent][-status.RING :]
    fresh = sum(r["fresh"] for r in records)
    page = asyncio.run(board.page(None)).text  # type: ignore[arg-type]
    assert f"<b>{fresh}</b> fresh, <b>{len(records) - fresh}</b> repeated" in page
    bars = re.findall(r"fill='(#[0-9a-f]{6})'><title>slot (\d+) (\w+) = ", page)
    assert len(bars) == 3 * len(records)
    by_slot = {int(s): c for c, s, _ in bars}
    for r in records:
        expected = status.FRESH_COLOR if r["fresh"] else status.REPEAT_COLOR
        assert by_slot[r["slot"]] == expected
    assert {name for _, _, name in bars} == {"news", "sport", "video"}
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")


def test_page_shows_no_exact_data_count(released):
    _, _, board = released
    metrics.EVENTS.labels("web", "accepted").inc(987_654)  # the opt-in data registry
    page = asyncio.run(board.page(None)).text  # type: ignore[arg-type]
    assert "987654" not in page and "987,654" not in page


def test_no_stream_yet():
    board = status.StatusBoard()
    assert "No stream released yet" in board.render_page()
    assert board.budget_document()["streams"] == []


def test_page_names_the_slots_that_lost_late_data_and_the_release_lag(released):
    """Issue 23, item 1: the default late signal is a count of slots, shown per stream."""
    late = LateSlots()
    late.mark("late-page", 41)
    late.mark("late-page", 41)  # the same slot again, e.g. from another partition
    late.mark("late-page", 42)
    metrics.RELEASE_LAG_SECONDS.labels("late-page").set(2.5)
    metrics.RELEASE_LAG_SLOTS.labels("late-page").set(2)
    page = released[2].render_page()
    assert "<tr><td>late-page</td><td>2</td><td>2.5 s (2 slots)</td></tr>" in page
