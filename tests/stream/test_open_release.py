"""The release agent on an open-domain stream, on in-memory tables (issue 36, section 2).

The level below makes selection all but certain for a key many users kept and all but
impossible for a key one user kept: ``eps = 20`` over ``w = 1`` slot with ``delta = 1e-3``,
``max_keys = 1`` under replace (``Delta = 2``): the noise is discrete Laplace at rate 10
(``a = e**-10``) and the threshold is ``tau = 2`` (``docs/open-domain.md``). A key of ``c``
users is released unless ``Z <= 1 - c``, probability ``a**(c-1) / (1 + a)``: below ``1e-30``
for ``c = 8``; a one-user key passes with probability ``a / (1 + a) < 5e-5``.
"""

from __future__ import annotations

import pytest

from app import metrics
from app.stream.config import load_settings
from app.stream.internal import OpenPartial, Partial, Tick
from app.stream.ops.ledger_view import render, to_json
from app.stream.ops.status import StatusBoard
from app.stream.release import LedgerEntry
from app.stream.release.open import CHUNK_SEP
from app.wire import audit, releases
from tests.stream.agent import TEST_ENV, Boom, agent, run, sized_topics

YAML = """
streams:
  - id: u
    domain: open
    slot_s: 1
    grace_s: 0.5
    release_timeout_s: 1
    retire_after: 2
    mechanism: {name: open_uniform}
    levels: [{name: only, w: 1, eps: 20.0, delta: 1.0e-3, population: 1000}]
"""


def make(tmp_path, ledger, slots, sent, fail_publish=False):
    """An agent of ``YAML`` over an ``events`` topic of 2 partitions whose broker appends each
    ``(topic, value)`` to ``sent`` (or raises :class:`Boom` if ``fail_publish``)."""
    config = tmp_path / "s.yaml"
    config.write_text(YAML)

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        if fail_publish:
            raise Boom
        sent.append((topic, value))

    settings = load_settings(env=TEST_ENV, config=config)
    return agent(settings, ledger, slots, produce, topics=sized_topics(events=2))


def tick(r, progress, now, partitions=2):
    """Every partition is complete up to event time ``progress``."""
    run(r, Tick("u", dict.fromkeys(range(partitions), progress), partitions).encode(), now)


def part(slot, partition, keys, counts, chunk=0, chunks=1):
    return OpenPartial("u", slot, partition, 2, tuple(keys), list(counts), chunk, chunks).encode()


def published(sent, topic="releases"):
    codec = releases if topic == "releases" else audit
    return [codec.decode(v) for t, v in sent if t == topic]


def test_key_counts_of_two_partitions_make_one_release_with_selected_keys(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)  # the stream starts at slot 9 (empty)
    # slot 10: partition 0 in two chunks, partition 1 in one; "/rare" has one user
    run(r, part(10, 0, ["/a", "/b"], [5, 4], chunk=0, chunks=2), 10.7)
    run(r, part(10, 0, ["/c"], [8], chunk=1, chunks=2), 10.8)
    assert [x.slot for x in published(sent)] == [9]  # partition 1 not in yet
    run(r, part(10, 1, ["/a", "/rare"], [6, 1]), 11.6)
    rel = published(sent)[-1]
    assert rel.slot == 10 and rel.schema == releases.OPEN_SCHEMA
    assert set(rel.keys) == {"/a", "/b", "/c"} and rel.new_keys == rel.keys
    assert list(rel.keys) == sorted(rel.keys)
    assert rel.threshold == 2 and rel.status == "publish" and rel.fresh
    assert rel.spent_exact_by_group == {"only": "20/1"}
    assert rel.delta_spent_exact_by_group == {"only": "1/1000"}
    assert rel.guarantee is not None and rel.guarantee["delta"] == 1e-3
    record = published(sent, "audit")[-1]
    assert record.delta_by_group == {"only": 1e-3}
    assert record.window_delta_spent_exact_by_group == {"only": "1/1000"}
    assert record.spent_dc_by_group == {} and record.spent_by_group == {"only": 20.0}
    assert not [k for k in slots if CHUNK_SEP in k], "a released slot's chunks are dropped"


def test_a_public_key_is_released_at_every_slot_until_retired(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)
    run(r, part(10, 0, ["/a"], [9]), 10.7)
    run(r, part(10, 1, [], []), 11.6)
    tick(r, 14.6, 14.7)  # slots 11-13: nobody sends /a
    rels = {x.slot: x for x in published(sent)}
    assert rels[10].new_keys == ("/a",)
    # public: released while nobody sends it (a count near 0, below tau = 2, so quiet), and
    # retired after retire_after = 2 quiet releases, unless noise of P(Z >= 2) < 1e-8 hit
    assert rels[11].keys == ("/a",) and rels[11].new_keys == ()
    assert rels[12].keys == ("/a",) and rels[12].retired == ("/a",)
    assert rels[13].keys == ()


def test_a_replayed_chunk_is_dropped_and_a_changed_one_is_late(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)
    run(r, part(10, 0, ["/a"], [9]), 10.7)
    run(r, part(10, 0, ["/a"], [500]), 10.8)  # a second copy: the first wins
    run(r, part(10, 1, [], []), 11.6)
    assert published(sent)[-1].histogram[0] < 100  # 9 users plus noise of rate 10
    before = metrics.LATE_PARTIALS.labels("u")._value.get()
    run(r, part(10, 0, ["/a"], [9]), 11.7)  # the same bytes after the release: a replay
    assert metrics.LATE_PARTIALS.labels("u")._value.get() == before
    run(r, part(10, 1, ["/z"], [3]), 11.8)  # values the release did not take: late
    assert metrics.LATE_PARTIALS.labels("u")._value.get() == before + 1


def test_two_agents_on_the_same_partials_release_the_same_bytes(tmp_path):
    """One slot, one noise: the keyed generator, whatever order the partials came in."""
    outs = []
    for order in ((0, 1), (1, 0)):
        ledger, slots, sent = {}, {}, []
        r = make(tmp_path, ledger, slots, sent)
        tick(r, 10.6, 10.6)
        msgs = {0: part(10, 0, ["/a", "/b"], [5, 4]), 1: part(10, 1, ["/a", "/c"], [6, 7])}
        for i, p in enumerate(order):
            run(r, msgs[p], 10.7 + i)
        outs.append([v for t, v in sent if t == "releases"])
    assert outs[0] == outs[1] and len(outs[0]) == 2


def test_a_crash_before_publishing_re_emits_the_recorded_bytes(tmp_path):
    ledger, slots, sent = {}, {}, []
    tick(make(tmp_path, ledger, slots, sent), 10.6, 10.6)  # slot 9 released
    r = make(tmp_path, ledger, slots, sent, fail_publish=True)
    run(r, part(10, 0, ["/a"], [9]), 10.7)
    with pytest.raises(Boom):
        run(r, part(10, 1, ["/b"], [9]), 11.6)  # slot 10 recorded, its publication refused
    entry = LedgerEntry.decode(ledger["u"])
    assert entry.published is False and entry.next_slot == 11
    restarted = make(tmp_path, ledger, slots, sent)
    tick(restarted, 10.7, 11.7)
    assert [v for t, v in sent if t == "releases"][-1] == entry.record("releases")
    assert set(releases.decode(entry.record("releases")).keys) == {"/a", "/b"}
    # the state survived: /a and /b are public at the next slot although nobody sends them
    tick(restarted, 12.6, 12.7)
    assert published(sent)[-1].slot == 11 and set(published(sent)[-1].keys) == {"/a", "/b"}
    assert published(sent)[-1].new_keys == ()


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (Partial("u", 10, 0, 2, [1]).encode(), "shape"),  # a labels partial
        (OpenPartial("u", 10, 0, 2, ("/a",), [1, 2]).encode(), "shape"),  # 2 rows, 1 level
        (OpenPartial("u", 10, 0, 2, ("x" * 300,), [1]).encode(), "shape"),  # > max_key_chars
    ],
)
def test_what_does_not_fit_an_open_stream_is_refused(tmp_path, raw, reason):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)
    refused = metrics.INTERNAL_REFUSED.labels("u", reason)._value.get()
    run(r, raw, 10.7)
    assert metrics.INTERNAL_REFUSED.labels("u", reason)._value.get() == refused + 1
    assert not [k for k in slots if CHUNK_SEP in k]


def test_the_ledger_keeps_eps_and_delta_and_recent_releases(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 12.6, 12.6)
    tick(r, 13.6, 13.7)
    entry = LedgerEntry.decode(ledger["u"])
    state = entry.state["state"]
    assert state["ledger"]["delta"] == [[2 << 40]]  # delta_i / w_i: 2 shares of 2**40 units
    assert [row[0] for row in entry.recent] == [11, 12]  # started at 11 (due 12.5)


def test_ledger_show_and_budget_show_delta_beside_eps(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    board = StatusBoard()
    r.publisher.watch.each += (board,)  # as the worker registers it
    tick(r, 10.6, 10.6)
    stream, entry = r.settings.stream("u"), LedgerEntry.decode(ledger["u"])
    lines = render(stream, entry).splitlines()
    assert "delta spent" in next(line for line in lines if line.startswith("level"))
    row = next(line for line in lines if line.startswith("only")).split()
    # w=1: the one slot spent the whole window, eps 20 of 20 and delta 1e-3 of 1e-3
    assert row == ["only", "1", "20", "20", "100.0%", "0.001", "0.001", "100.0%"]
    for view in (to_json(stream, entry), board.budget_document()["streams"][0]):
        level = view["levels"][0]
        assert (level["window_spent_exact"], level["window_delta_spent_exact"]) == (
            "20/1",
            "1/1000",
        )
        assert (level["delta"], level["delta_fraction"]) == (1e-3, 1.0)


def test_an_unreadable_chunk_is_dropped_and_the_slot_released_without_it(tmp_path):
    ledger, slots, sent = {}, {}, []
    r = make(tmp_path, ledger, slots, sent)
    tick(r, 10.6, 10.6)
    run(r, part(10, 0, ["/a"], [9]), 10.7)
    [chunk] = [k for k in slots if CHUNK_SEP in k]
    slots[chunk] = b"\xc1"  # garbage in the changelog
    refused = metrics.INTERNAL_REFUSED.labels("u", "state")._value.get()
    run(r, part(10, 1, ["/b"], [9]), 11.6)
    assert metrics.INTERNAL_REFUSED.labels("u", "state")._value.get() == refused + 1
    rel = published(sent)[-1]
    assert rel.slot == 10 and rel.keys == ("/b",)  # /a's users were lost with the chunk
    assert "u" not in r.failed
