"""``app.stream.collect.batch.BatchConsumer`` on in-memory clients: offsets, dead letters, side
input.

The clients come from the ``fake_kafka`` fixture and are set on the service directly:
``on_start`` / ``on_stop`` (which build and stop the real aiokafka clients) need a broker and
are run by ``tests/integration``.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from aiokafka import TopicPartition

from app import metrics
from app.stream.collect.batch import GAP_RETRY_S, BatchConsumer
from app.stream.topics import load_topics


class Collector:
    """The ``Collecting`` bookkeeping, reduced to what a test sets: the first offset needed."""

    def __init__(self) -> None:
        self.partitions: dict[int, str] = {}
        self.need: dict[int, int] = {}
        self.outcomes: Counter[tuple[str, str]] = Counter()

    def assign(self, partition: int) -> None:
        self.partitions[partition] = "assigned"

    def revoke(self, partition: int) -> None:
        self.partitions.pop(partition)

    def commit_offset(self, partition: int, position: int) -> int:
        return self.need.get(partition, position)


class Service(BatchConsumer):
    def __init__(self, settings, topics) -> None:
        super().__init__(
            settings,
            topics,
            "g",
            source=topics.events,
            side_input=topics.preferences,
            collector=Collector(),
            policy=lambda exc, rec, log: None,
        )
        self.applied: list[bytes | None] = []

    def _apply_side_input(self, record) -> None:
        self.applied.append(record.value)


@pytest.fixture
def service(make_settings, fake_kafka):
    topics = load_topics()
    svc = Service(make_settings(), topics)
    svc._consumer = fake_kafka.Consumer(topics.events, {0: [b"e"] * 5, 1: [b"e"] * 3, 2: []})
    svc._consumer.assign([TopicPartition(topics.events, p) for p in (0, 1, 2)])
    svc._producer = fake_kafka.Producer()
    return svc


def tp(svc, p):
    return TopicPartition(svc.source, p)


def test_commit_sends_dead_letters_first_then_the_first_offset_still_needed(service):
    async def go():
        service.collector.assign(0)
        service.collector.assign(1)
        service.collector.need[0] = 2
        service._consumer.positions.update({tp(service, 0): 5, tp(service, 1): 3})
        service._send_dead_letter(b"k", b"dead")
        await service._commit([tp(service, p) for p in (0, 1, 2)])

    asyncio.run(go())
    assert service._producer.sent == [(service.topics.dead_letter, b"k", b"dead")]
    assert service._producer.flushes == 1
    # partition 2 is not the collector's: nothing committed for it
    assert service._consumer.committed == [{tp(service, 0): 2, tp(service, 1): 3}]


def test_a_failed_dead_letter_blocks_the_commit_and_is_sent_again(service):
    async def go():
        service.collector.assign(0)
        service._producer.fail[service.topics.dead_letter] = 1
        service._send_dead_letter(b"k", b"dead")
        await service._commit([tp(service, 0)])
        assert service._consumer.committed == [] and service._producer.flushes == 0
        assert len(service._pending) == 1  # sent again, not yet acknowledged
        await service._commit([tp(service, 0)])

    asyncio.run(go())
    assert service._producer.values(service.topics.dead_letter) == [b"dead"]
    assert service._consumer.committed == [{tp(service, 0): 0}]


def test_assignment_records_the_end_to_catch_up_with_and_revocation_commits(service):
    async def go():
        await service.on_assigned([tp(service, 0), tp(service, 1)])
        assert service.collector.partitions == {0: "assigned", 1: "assigned"}
        assert service._targets == {0: 5, 1: 3}
        service.consuming = True
        service.collector.need[1] = 1
        service._consumer.positions[tp(service, 1)] = 3
        await service.on_revoked([tp(service, 1)])

    asyncio.run(go())
    assert service._consumer.committed == [{tp(service, 1): 1}]  # committed before forgetting
    assert service.collector.partitions == {0: "assigned"} and service._targets == {0: 5}
    assert service.consuming is False


def test_the_side_input_is_read_to_its_end_then_tailed(service, fake_kafka):
    side = service.topics.preferences
    service._side = fake_kafka.Consumer(side, {0: [b"a", b"b"], 1: [b"c"]})

    async def go():
        await service._read_side_input(until_end=True)
        assert sorted(service.applied) == [b"a", b"b", b"c"]
        assert service._side.assignment() == {TopicPartition(side, 0), TopicPartition(side, 1)}
        service._side.logs[1].append(b"d")
        await service._read_side_input(until_end=False)

    asyncio.run(go())
    assert sorted(service.applied) == [b"a", b"b", b"c", b"d"]


def test_exact_end_asks_the_broker_past_a_stale_highwater(service, fake_kafka, monkeypatch):
    """Issue 23 item 9: the highwater the last fetch saw predates a request the devices already
    answered; the reports service's read on an unknown round asks the broker for the end."""
    side = service.topics.preferences
    service._side = fake_kafka.Consumer(side, {0: [b"a"]})

    async def go():
        await service._read_side_input(until_end=True)
        service._side.logs[0].append(b"new")
        monkeypatch.setattr(service._side, "highwater", lambda tp: 1)  # the last fetch's view
        await service._read_side_input(until_end=True)
        assert service.applied == [b"a"]  # stale end: nothing more read
        await service._read_side_input(until_end=True, exact_end=True)

    asyncio.run(go())
    assert service.applied == [b"a", b"new"]


class Racing(Service):
    """A service whose ``_before_batch`` awaits while the group takes partition 0 away (a
    rebalance lands between the fetch and the count, as on the reports service's side-input
    read) and gives it back."""

    def __init__(self, settings, topics) -> None:
        super().__init__(settings, topics)
        self.tick_s = 0.25
        self.counted: dict[int, list[int]] = {}
        self.collector.add_batch = self._count  # type: ignore[method-assign]

    def _count(self, partition, records, wall):
        self.counted.setdefault(partition, []).extend(r.offset for r in records)
        self.collector.outcomes["s", "accepted"] += len(records)
        return []

    async def _before_batch(self, batches) -> None:
        tp0 = TopicPartition(self.source, 0)
        if tp0 in batches and not self.counted:
            await self.on_revoked([tp0])
            await self.on_assigned([tp0])

    async def _observe(self, wall, batches) -> None:
        pass

    async def _check_caught_up(self) -> None:
        pass

    async def _flush(self, wall) -> None:
        pass


def test_a_rebalance_between_fetch_and_count_neither_loses_nor_counts_the_batch(
    make_settings, fake_kafka
):
    topics = load_topics()
    svc = Racing(make_settings(), topics)
    svc._consumer = fake_kafka.Consumer(topics.events, {0: [b"e"] * 5})
    tp0 = TopicPartition(topics.events, 0)
    svc._consumer.assign([tp0])
    svc._producer = fake_kafka.Producer()
    svc.collector.assign(0)
    svc.consuming = True
    svc._consumer.stop_after_first_poll(svc)
    asyncio.run(Racing._consume.fun(svc))
    # The revocation committed no further than the batch in hand (the fetch had moved the
    # position to 5), and the batch was not counted: the consumer restarts from the commit.
    assert svc._consumer.committed == [{tp0: 0}]
    assert svc.counted == {}


class Counting(Racing):
    """Counts what it is given, with nothing between the fetch and the count."""

    async def _before_batch(self, batches) -> None:
        pass


def test_records_fetched_while_the_assignment_callback_awaits_are_counted(
    make_settings, fake_kafka
):
    """aiokafka sets the assignment (and its fetches start) before it calls ``on_assigned``,
    which awaits the partitions' end offsets: a batch the loop takes meanwhile belongs to the
    collector. Passing over it moved the position, and so the next commit, past records that
    no one counted (the K = 8 bench's shortfall, issue 24)."""
    topics = load_topics()
    svc = Counting(make_settings(), topics)
    consumer = fake_kafka.Consumer(topics.events, {0: [b"e"] * 5})
    tp0 = TopicPartition(topics.events, 0)
    consumer.assign([tp0])  # the group's assignment, before the callback
    svc._consumer, svc._producer = consumer, fake_kafka.Producer()
    asked, answered = asyncio.Event(), asyncio.Event()
    ends = consumer.end_offsets

    async def slow_ends(tps):
        asked.set()
        await answered.wait()
        return await ends(tps)

    consumer.end_offsets = slow_ends
    consumer.stop_after_first_poll(svc, before=asked.wait)  # the callback awaits the broker

    async def go():
        assigning = asyncio.create_task(svc.on_assigned([tp0]))
        await Counting._consume.fun(svc)
        answered.set()
        await assigning

    asyncio.run(go())
    assert svc.counted == {0: [0, 1, 2, 3, 4]}
    assert svc._targets == {0: 5}


# -- issue 31 §3: every fetched record gets exactly one outcome before its commit -------------


def unaccounted(svc, reason):
    return metrics.RECORDS_UNACCOUNTED.labels(svc.shortlabel, reason)._value.get()


def counting(make_settings, fake_kafka, log):
    topics = load_topics()
    svc = Counting(make_settings(), topics)
    svc._consumer = fake_kafka.Consumer(topics.events, {0: log})
    svc._consumer.assign([TopicPartition(topics.events, 0)])
    svc._producer = fake_kafka.Producer()
    return svc


async def turn(svc):
    """One turn of the consume loop (a fetch, the count, the checks)."""
    consumer = svc._consumer
    consumer.getmany = type(consumer).getmany.__get__(consumer)
    consumer.stop_after_first_poll(svc)
    svc._stopped.clear()
    await Counting._consume.fun(svc)


def test_a_batch_of_a_partition_the_collector_does_not_hold_is_read_again(
    make_settings, fake_kafka
):
    svc = counting(make_settings, fake_kafka, [b"e"] * 5)
    before = unaccounted(svc, "not_assigned")

    async def go():
        await turn(svc)  # the consumer holds partition 0, the collector not (yet)
        assert svc.counted == {} and svc._consumer.positions[tp(svc, 0)] == 0
        svc.collector.assign(0)
        await turn(svc)

    asyncio.run(go())
    assert unaccounted(svc, "not_assigned") - before == 5
    assert svc.counted == {0: [0, 1, 2, 3, 4]}


def test_records_neither_counted_nor_refused_are_flagged(make_settings, fake_kafka):
    svc = counting(make_settings, fake_kafka, [b"e"] * 4)
    svc.collector.assign(0)
    before = unaccounted(svc, "uncounted")

    def count_all_but_one(partition, records, wall):
        svc.collector.outcomes["s", "accepted"] += len(records) - 1
        return []

    svc.collector.add_batch = count_all_but_one  # type: ignore[method-assign]
    asyncio.run(turn(svc))
    assert unaccounted(svc, "uncounted") - before == 1


def test_a_position_past_the_last_record_handed_over_is_sought_back_and_not_committed(
    make_settings, fake_kafka
):
    """The consumer's position moves past offsets 5-7 without handing them over (what the
    issue's steady-load run looked like from outside): they are read again, and no commit in
    between passes them."""
    svc = counting(make_settings, fake_kafka, [b"e"] * 5)
    svc.collector.assign(0)
    before = unaccounted(svc, "position_moved")

    async def go():
        await turn(svc)
        svc._consumer.logs[0].extend([b"e"] * 3)
        svc._consumer.positions[tp(svc, 0)] = 8  # skipped 5, 6, 7
        await svc._commit([tp(svc, 0)])
        await svc._check_positions()
        assert svc._consumer.positions[tp(svc, 0)] == 5
        await turn(svc)

    asyncio.run(go())
    assert svc._consumer.committed == [{tp(svc, 0): 5}]
    assert unaccounted(svc, "position_moved") - before == 3
    assert svc.counted == {0: list(range(8))}


def test_skipped_offsets_are_read_again_and_repeated_ones_not_counted_twice(
    make_settings, fake_kafka
):
    svc = counting(make_settings, fake_kafka, [b"e"] * 12)
    svc.collector.assign(0)
    gaps, repeats = unaccounted(svc, "offset_gap"), unaccounted(svc, "offset_repeat")
    taken = unaccounted(svc, "gap_taken")
    rec = svc._consumer.rec
    position = svc._consumer.positions

    async def go():
        svc._take(tp(svc, 0), [rec(0, o) for o in (0, 1, 2)], 0.0)
        svc._take(tp(svc, 0), [rec(0, o) for o in (5, 6)], 0.0)  # 3 and 4 skipped
        assert svc.counted == {0: [0, 1, 2]} and position[tp(svc, 0)] == 3
        svc._consumer.logs[0] = svc._consumer.logs[0][:7]  # the log's end, for now
        await turn(svc)  # read again from 3
        assert svc.counted == {0: list(range(7))}
        svc._take(tp(svc, 0), [rec(0, 6)], 0.0)  # 6 again: not counted twice
        svc._consumer.logs[0] += [b"e"] * 5
        svc._take(tp(svc, 0), [rec(0, o) for o in (7, 8, 10, 11)], 0.0)  # 9 skipped: cut
        assert svc.counted == {0: list(range(9))} and position[tp(svc, 0)] == 9
        svc._take(tp(svc, 0), [rec(0, o) for o in (10, 11)], 0.0)  # 9 still missing: again
        assert svc.counted == {0: list(range(9))} and position[tp(svc, 0)] == 9
        svc._sought[0, 9] -= GAP_RETRY_S + 1  # the broker kept the gap for too long: taken
        svc._take(tp(svc, 0), [rec(0, o) for o in (10, 11)], 0.0)
        assert svc.counted == {0: [*range(9), 10, 11]} and svc._sought == {}

    asyncio.run(go())
    assert unaccounted(svc, "offset_gap") - gaps == 2 + 1  # each gap once
    assert unaccounted(svc, "gap_taken") - taken == 1
    assert unaccounted(svc, "offset_repeat") - repeats == 1
