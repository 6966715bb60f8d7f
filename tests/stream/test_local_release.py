"""The local slot protocol on in-memory tables: request persisted before sent, rounds, releases."""

from __future__ import annotations

import msgpack

from app.dp.local.wire import CollectionRequest
from app.stream.config import load_settings
from app.stream.internal import PartitionTally, Tick
from tests.stream.agent import TEST_ENV, Boom, agent, sized_topics
from tests.stream.agent import run as agent_run

YAML = """
streams:
  - id: loc
    mode: local
    labels: [a, b]
    slot_s: 10
    round_s: 2
    release_timeout_s: 1
    mechanism: {name: lpa, params: {users: 60, oracle: grr}}
    levels: [{name: only, w: 3, eps: 1.0}]
"""


def make(tmp_path, ledger, slots, sent, fail_on=None):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    settings = load_settings(env=TEST_ENV, config=path)
    topics = sized_topics(reports=2)

    async def produce(topic, key, value):
        if topic == fail_on:
            raise Boom
        if topic == topics.collection_requests:
            # The request is in the ledger (and persisted) before it leaves.
            entry = msgpack.unpackb(ledger["loc"])
            assert entry["request"] == value and entry["sent"] is False
        sent.append((topic, value))

    return agent(settings, ledger, slots, produce, topics)


def run(r, raw, now=None):
    """Hand ``raw`` to the agent at wall time ``now`` (a tally's own time if not given)."""
    agent_run(r, raw, msgpack.unpackb(raw)["now"] if now is None else now)


def tick(r, now):
    """A reports-service tick (it carries no progress in local mode) at wall time ``now``."""
    run(r, Tick("loc", {}, 2).encode(), now)


def requests(sent):
    return [msgpack.unpackb(v) for t, v in sent if t == "collection-requests"]


def test_one_release_per_slot_with_rounds_closed_by_tallies_or_deadline(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 95.0)  # first slot: 10 (starts at 100)
    assert requests(sent) == []
    tick(r, 100.1)
    [req] = requests(sent)
    assert (req["slot"], req["deadline"], req["request"]["round"]) == (10, 102.1, "dissimilarity")
    cr = CollectionRequest.from_dict(req["request"])
    asked = sum(cr.asks(u) for u in range(60))
    # Both reports partitions send their tally: the round closes at once.
    for p, support in ((0, [asked // 2, 0]), (1, [asked - asked // 2, 0])):
        n = asked // 2 if p == 0 else asked - asked // 2
        run(r, PartitionTally("loc", cr.slot, cr.round, p, 2, support, [n], 102.2).encode())
    reqs = requests(sent)
    rels = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    assert len(reqs) + len(rels) == 2  # a publication round, or the slot released already
    # Slots 11 and 12 pass without any tally: rounds time out, every slot is released once.
    for now in (103.5, 105.0, 110.1, 113.5, 120.1, 123.5, 130.0):
        tick(r, now)
    rels = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    assert [x["slot"] for x in rels] == [10, 11, 12]
    assert all(len(x["histogram"]) == 2 for x in rels)
    assert msgpack.unpackb(ledger["loc"])["next_slot"] == 13


def test_crash_after_persisting_a_request_resends_the_same_bytes(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent, fail_on="collection-requests")
    tick(r, 95.0)
    try:
        tick(r, 100.1)
    except Boom:
        pass
    stored = msgpack.unpackb(ledger["loc"])["request"]
    assert stored is not None and sent == []
    # The restarted agent (fresh object, same tables) re-sends the stored request, not a new plan.
    r2 = make(tmp_path, ledger, slots, sent)
    tick(r2, 100.6)
    assert [v for t, v in sent if t == "collection-requests"] == [stored]
    assert msgpack.unpackb(ledger["loc"])["sent"] is True


def test_a_missed_slot_is_stepped_without_requests(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 95.0)
    tick(r, 109.0)  # less than round_s left in slot 10
    assert requests(sent) == []
    rels = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    assert [(x["slot"], x["fresh"]) for x in rels] == [(10, False)]


def test_a_round_pending_across_a_restart_waits_for_its_replayed_tallies(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 95.0)
    tick(r, 100.1)  # asks round 1 of slot 10, deadline 102.1
    first = msgpack.unpackb(ledger["loc"])["request"]
    cr = CollectionRequest.from_dict(msgpack.unpackb(first)["request"])
    # Killed before the round closed; back at 107, long after deadline + release_timeout_s.
    r2 = make(tmp_path, ledger, slots, sent)
    tick(r2, 107.0)
    assert msgpack.unpackb(ledger["loc"])["request"] == first  # still pending
    # The restarted reports service replays the round's reports: their tallies close it.
    for p in (0, 1):
        run(r2, PartitionTally("loc", cr.slot, cr.round, p, 2, [3, 1], [4], 107.2).encode())
    assert msgpack.unpackb(ledger["loc"])["request"] != first
    # Without tallies it still closes, release_timeout_s (1 s) after the restart.
    ledger2, slots2, sent2 = {}, {}, []
    r3 = make(tmp_path, ledger2, slots2, sent2)
    tick(r3, 95.0)
    tick(r3, 100.1)
    first = msgpack.unpackb(ledger2["loc"])["request"]
    r4 = make(tmp_path, ledger2, slots2, sent2)
    tick(r4, 107.0)
    tick(r4, 107.9)
    assert msgpack.unpackb(ledger2["loc"])["request"] == first
    tick(r4, 108.1)
    assert msgpack.unpackb(ledger2["loc"])["request"] != first
