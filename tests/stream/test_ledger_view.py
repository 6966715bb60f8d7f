"""``dpstream ledger show``'s rendering, on ledgers the releasers wrote into in-memory tables."""

from __future__ import annotations

import msgpack
import pytest

from app.dp.local.wire import CollectionRequest, mask_users
from app.stream.internal import Partial, Tick
from app.stream.ops.ledger_view import render
from app.stream.release import LedgerEntry
from tests.stream.agent import agent, run


@pytest.fixture
def settings(make_settings, central_stream, local_stream):
    """A central stream ``cen`` (1 s slots) and a local one ``loc`` (60 users)."""
    cen = central_stream(id="cen", labels=["a", "b"], slot_s=1, grace_s=0.5)
    return make_settings(cen, local_stream())


def make(settings):
    ledger: dict[str, bytes] = {}

    async def produce(topic, key, value):
        return None

    return agent(settings, ledger, {}, produce), ledger


def test_central_view_shows_rule_window_and_recent_releases(settings):
    r, ledger = make(settings)
    run(r, Tick("cen", {0: 10.6}, 1).encode(), 10.6)  # first slot: 9
    run(r, Partial("cen", 10, 0, 1, [2, 0]).encode(), 11.6)
    run(r, Tick("cen", {0: 13.6}, 1).encode(), 13.7)  # slots 11 and 12 closed by progress
    text = render(settings.stream("cen"), LedgerEntry.decode(ledger["cen"]))
    lines = text.splitlines()
    assert lines[0].startswith("stream cen: ") and len(lines[0]) > len("stream cen: ")
    assert "next slot 13 (last release published: True)" in text
    assert any(line.startswith("only") for line in lines)
    assert "population" not in text and "pending request" not in text
    assert [int(line.split()[0]) for line in lines if line[:12].strip().isdigit()] == [
        9,
        10,
        11,
        12,
    ]


def test_local_view_shows_population_window_and_pending_request(settings):
    r, ledger = make(settings)
    stream = settings.stream("loc")
    run(r, Tick("loc", {}, 1).encode(), 95.0)
    run(r, Tick("loc", {}, 1).encode(), 100.1)  # slot 10, round 1 asked
    entry = LedgerEntry.decode(ledger["loc"])
    assert entry.local.request is not None
    value = msgpack.unpackb(entry.local.request)
    cohort = int(mask_users(CollectionRequest.from_dict(value["request"]), 60).sum())
    text = render(stream, entry)
    assert text.splitlines()[0] == f"stream loc: {stream.build_mechanism().describe()}"
    assert (
        f"pending request: slot 10 round dissimilarity cohort {cohort} users, "
        f"deadline 102.100, sent: True"
    ) in text
    assert f"at slot 10: used {cohort}, available {60 - cohort}" in text
    assert f"slot {10:>12}: {cohort} users reported" in text
    # Rounds time out, slots 10 and 11 are released: no pending request, two recent releases.
    for now in (103.5, 105.0, 110.1, 113.5, 115.0):
        run(r, Tick("loc", {}, 1).encode(), now)
    entry = LedgerEntry.decode(ledger["loc"])
    text = render(stream, entry)
    assert "pending request: none" in text
    assert "population: 60 users in" in text and "window spent" not in text
    level = stream.levels[0]  # issue 23 item 11: asked users spent their whole eps
    figure = f"{level.name} {level.eps:.4g} of eps {level.eps:g} (w={level.w})"
    assert f"max per-user spend in the last w slots (the figure eps bounds): {figure}" in text
    used = sum(
        int(line.rsplit(":", 1)[1].split()[0]) for line in text.splitlines() if "reported" in line
    )
    assert f"used {used}, available {60 - used}" in text
    assert [int(x[0]) for x in entry.recent] == [10, 11]


def test_view_says_what_skip_and_nullified_mean(settings):
    """Issue 23 item 12: the status column's words are explained under the releases."""
    r, ledger = make(settings)
    run(r, Tick("cen", {0: 10.6}, 1).encode(), 10.6)
    run(r, Tick("cen", {0: 12.6}, 1).encode(), 12.7)
    text = render(settings.stream("cen"), LedgerEntry.decode(ledger["cen"]))
    legend = text[text.index("status: publish") :]
    assert "skip = " in legend and "nullified = " in legend
    assert max(len(line) for line in legend.splitlines()) <= 100
