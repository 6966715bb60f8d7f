"""``app.stream.collect.ingest.IngestService`` on in-memory clients (``fake_kafka``), no broker.

What runs here: the tick interval, the ``preferences`` side input, the refusal of a partition
count other than the spec's, one turn of the consume loop (counting, dead letters, refusal),
the flush (partials, then ticks, then the commit) and the lag and connection observations.
Building the real aiokafka clients (``on_start``) and Kafka's group rebalancing need a broker:
``tests/integration`` covers them.
"""

from __future__ import annotations

import asyncio
import math
import time

import msgpack
import pytest
from aiokafka import TopicPartition

from app import metrics
from app.stream.collect import ingest
from app.stream.collect.batch import UNACCOUNTED
from app.stream.collect.ingest import GAP_S, IngestService
from app.stream.collect.partitioning import partition_for
from app.stream.records import unpack
from app.stream.topics import load_topics

TWO_LEVELS = [{"name": "strict", "w": 4, "eps": 1.0}, {"name": "loose", "w": 2, "eps": 2.0}]


@pytest.mark.parametrize(
    ("slots", "expected"),
    [((10.0,), 1.0), ((0.4,), 0.1), ((0.1,), 0.05), ((8.0, 0.6, 2.0), 0.15)],
)
def test_tick_interval_is_a_quarter_of_the_shortest_slot_within_bounds(
    make_settings, central_stream, slots, expected
):
    streams = [central_stream(id=f"s{i}", slot_s=s) for i, s in enumerate(slots)]
    svc = IngestService(make_settings(*streams), load_topics(), group_id="g")
    assert svc.tick_s == pytest.approx(expected)


def test_the_loop_flushes_at_a_slots_due_time_until_the_input_shows_it(
    make_settings, central_stream, fake_kafka, levels_log
):
    """The consume loop's next flush (besides each tick) is the first due time (end + grace)
    of a slot not yet closable at a partition's progress: at once while the progress lags the
    due time by less than a tick, from the wall clock otherwise."""
    settings = make_settings(central_stream(slot_s=2.0, grace_s=0.5))
    svc = make_service(settings, fake_kafka)
    assert svc._next_due(101.0) == math.inf  # nothing assigned, nothing to close
    assign(svc, 0)
    svc.collector.mark_caught_up(0)
    # No progress yet: from the wall clock, slot 50 = [100, 102) is due at 102.5.
    assert svc._next_due(101.0) == 102.5
    for fetched in (101.0, 101.6, 102.45):  # healthy fetches, at the end of the partition
        svc.collector.observe_fetch(0, fetched, True, GAP_S)
    # At 102.55 the partition has only shown 102.45: slot 50 is still to close, retry now.
    assert svc._next_due(102.55) == 102.5
    # Progress past it: the next due time is slot 51's.
    svc.collector.observe_fetch(0, 102.6, True, GAP_S)
    assert svc._next_due(102.65) == 104.5
    # A progress held more than a tick behind (after an outage) leaves it to the tick cadence.
    assert svc._next_due(106.0) == 106.5


def users_of(partition, partitions, n):
    """``n`` user ids whose keys hash to ``partition`` (Kafka's default partitioner)."""
    found = (f"user-{i}" for i in range(10_000))
    return [u for u in found if partition_for(u.encode(), partitions) == partition][:n]


@pytest.fixture
def levels_log(monkeypatch, fake_kafka):
    """The ``levels`` topic the service restores level histories from (empty: a first owner)."""
    topics = load_topics()
    logs = {p: [] for p in range(topics.spec("events").partitions)}
    monkeypatch.setattr(
        ingest, "AIOKafkaConsumer", lambda **kw: fake_kafka.Consumer(topics.levels, logs)
    )
    return logs


def make_service(settings, fake_kafka):
    topics = load_topics()
    total = topics.spec("events").partitions
    svc = IngestService(settings, topics, group_id="g")
    svc._consumer = fake_kafka.Consumer(topics.events, {p: [] for p in range(total)})
    svc._side = fake_kafka.Consumer(topics.preferences, {p: [] for p in range(total)})
    svc._producer = fake_kafka.Producer()
    return svc


@pytest.fixture
def service(make_settings, central_stream, fake_kafka, levels_log):
    return make_service(make_settings(central_stream(levels=TWO_LEVELS)), fake_kafka)


def tps(svc, *parts):
    return [TopicPartition(svc.source, p) for p in parts]


def assign(svc, *parts):
    """The group assigns ``parts`` to this worker."""
    svc._consumer.assign(tps(svc, *parts))
    asyncio.run(svc.on_assigned(tps(svc, *parts)))


def test_a_preference_record_changes_the_level_from_its_kafka_timestamp(service, fake_kafka):
    (stream,) = service.settings.streams
    assign(service, 0)
    (user,) = users_of(0, service._partitions_total, 1)
    level = msgpack.packb({"level": "loose"})
    service._apply_side_input(fake_kafka.Rec("preferences", 0, 0, None, level, 100_000))
    assert len(service.collector.preferences) == 0  # no key: not a user's record
    service._apply_side_input(fake_kafka.Rec("preferences", 0, 1, user.encode(), level, 100_000))
    # recorded at 100 s: slot 10 is still strict's (0); slots 11-14 (gap of max w) are not
    # counted; loose (1) from slot 15 on
    groups = [service.collector.preferences.group(stream, user, s) for s in range(10, 17)]
    assert groups == [0, None, None, None, None, 1, 1]


def test_a_preference_outside_its_keys_partition_is_dead_lettered(service, fake_kafka):
    assign(service, 0, 1)
    (user,) = users_of(1, service._partitions_total, 1)
    level = msgpack.packb({"level": "loose"})

    async def apply():
        service._apply_side_input(fake_kafka.Rec("preferences", 0, 5, user.encode(), level))
        await service._commit([])  # waits for the dead letter's send

    asyncio.run(apply())
    assert len(service.collector.preferences) == 0
    (dead,) = service._producer.values(service.topics.dead_letter)
    assert (unpack(dead)["reason"], unpack(dead)["offset"]) == ("wrong_partition", 5)


def test_no_slot_closes_before_the_level_changes_are_saved(service, fake_kafka):
    assign(service, 0)
    (user,) = users_of(0, service._partitions_total, 1)
    service._side.logs[0].append((user.encode(), msgpack.packb({"level": "loose"}), 100_000))
    service._producer.fail[service.topics.levels] = 1
    flush_at(service, 120.5)
    assert service._producer.values(service.topics.partials) == []  # the save failed
    flush_at(service, 121.0)
    saved = [unpack(v) for v in service._producer.values(service.topics.levels)]
    (history,) = [v for v in saved if "changes" in v]  # saved once it went through
    assert history["changes"][-1][1] == "loose"
    assert saved[-1] == {"offset": 1}  # then the next preferences offset of partition 0
    kinds = [unpack(v)["kind"] for v in service._producer.values(service.topics.partials)]
    assert kinds[0] == "partial" and kinds[-1] == "tick"


def test_another_partition_count_than_the_spec_is_refused(service):
    total = service._partitions_total
    service._consumer.logs = {p: [] for p in range(total - 2)}
    assign(service, 0)
    assert f"has {total - 2} partitions but topics/events.yaml declares {total}" in service.failed
    assert "refusing to count" in service.failed


def test_the_spec_partition_count_is_accepted(service):
    assign(service, 0, 1)
    assert service.failed == "" and set(service.collector.partitions) == {0, 1}


def consume_once(svc):
    """One turn of the consume loop: the service stops after its first poll."""
    svc._consumer.stop_after_first_poll(svc)
    asyncio.run(IngestService._consume.fun(svc))


def event(user, ts, value):
    return (
        user.encode(),
        msgpack.packb({"stream": "s", "user": user, "ts": ts, "value": value}),
        0,
    )


def test_the_loop_counts_good_events_and_dead_letters_bad_ones(service):
    u1, u2 = users_of(0, service._partitions_total, 2)
    now = time.time()
    service._consumer.logs[0] += [event(u1, now, "a"), event(u2, now, "z"), event(u1, now, "b")]
    assign(service, 0)
    consume_once(service)
    # the open slot holds u1's first value only (u2's is out of the domain, u1's second is a
    # duplicate)
    (slot,) = service.collector.partitions[0].buckets.items()
    assert (slot[0], len(slot[1]), slot[1].find([u1])) == (("s", int(now // 10)), 1, [0])
    (dead,) = service._producer.values(service.topics.dead_letter)
    assert (unpack(dead)["reason"], unpack(dead)["offset"]) == ("out_of_domain", 1)
    assert service.consuming  # caught up with the end found at assignment


def test_a_poison_stream_field_is_dead_lettered_counted_and_committed_past(service):
    """Issue 31 §1: an event whose ``stream`` is a list among honest ones of one stream made
    the fast path raise and the loop die before any commit. Now: dead-lettered, every record
    has one outcome, and the slot's commit passes it."""
    u1, u2 = users_of(0, service._partitions_total, 2)
    now = time.time()
    poison = msgpack.packb({"stream": ["s"], "user": u1, "ts": now, "value": "a"})
    service._consumer.logs[0] += [
        event(u1, now, "a"),
        (u1.encode(), poison, 0),
        event(u2, now, "b"),
    ]
    label = service.shortlabel
    before = {r: metrics.RECORDS_UNACCOUNTED.labels(label, r)._value.get() for r in UNACCOUNTED}
    assign(service, 0)

    async def go():  # one event loop: the dead letter's send is awaited before the commit
        service._consumer.stop_after_first_poll(service)
        await IngestService._consume.fun(service)
        (slot,) = service.collector.partitions[0].buckets.items()
        assert slot[0] == ("s", int(now // 10))
        assert (len(slot[1]), slot[1].find([u1, u2])) == (2, [0, 1])
        service.collector.observe_fetch(0, now + 25, at_end=True, gap_s=100)
        service.collector.observe_fetch(0, now + 30, at_end=True, gap_s=100)
        await service._flush(now + 30)

    asyncio.run(go())
    (dead,) = service._producer.values(service.topics.dead_letter)
    assert (unpack(dead)["reason"], unpack(dead)["offset"]) == ("wrong_type", 1)
    after = {r: metrics.RECORDS_UNACCOUNTED.labels(label, r)._value.get() for r in UNACCOUNTED}
    assert after == before
    assert service._consumer.committed == [{tps(service, 0)[0]: 3}]


def test_a_refusing_service_counts_nothing(service):
    (u1,) = users_of(0, service._partitions_total, 1)
    service._consumer.logs[0] += [event(u1, time.time(), "a"), (b"x", b"\xc1", 0)]
    service._consumer.logs.pop(3)  # the topic now has one partition less than the spec
    assign(service, 0)
    consume_once(service)
    assert service.failed
    assert service.collector.partitions[0].buckets == {}
    assert service._producer.sent == []


def flush_at(svc, t):
    """Fetches that found partition 0 at its end, settled, up to wall time ``t``; a flush."""
    svc.collector.partitions[0].caught_up = True
    svc.collector.observe_fetch(0, t - 5, at_end=True, gap_s=100)
    svc.collector.observe_fetch(0, t, at_end=True, gap_s=100)
    asyncio.run(svc._flush(t))


def data_count(outcome):
    value = metrics.DATA_REGISTRY.get_sample_value(
        "dpstream_events_total", {"stream": "s", "outcome": outcome}
    )
    return value or 0.0


@pytest.mark.parametrize("expose", [False, True])
def test_a_flush_sends_partials_then_ticks_then_commits(
    make_settings, central_stream, fake_kafka, levels_log, expose
):
    env = {"DPSTREAM_EXPOSE_DATA_COUNTS": "true"} if expose else {}
    svc = make_service(make_settings(central_stream(levels=TWO_LEVELS), **env), fake_kafka)
    topics, total = svc.topics, svc._partitions_total
    assign(svc, 0)
    u1, u2, u3 = users_of(0, total, 3)
    for offset, (user, ts, value) in enumerate([(u1, 101, "a"), (u2, 105, "c"), (u3, 111, "b")]):
        svc.collector.add(0, offset, user.encode(), event(user, ts, value)[1], wall_now=112)
    svc._consumer.positions[tps(svc, 0)[0]] = 3
    before = data_count("accepted")
    flush_at(svc, 120.5)  # slot 10 (100-110) is due at 111; slot 11 is not (121)
    out = [unpack(v) for v in svc._producer.values(topics.partials)]
    assert [(m["kind"], m.get("slot")) for m in out] == [("partial", 10), ("tick", None)]
    assert out[0]["counts"] == [1, 0, 1, 0, 0, 0] and out[0]["partitions"] == total
    assert out[1]["progress"] == {0: 120.5}
    assert {k for t, k, _ in svc._producer.sent if t == topics.partials} == {b"s"}
    assert svc._consumer.committed == [{tps(svc, 0)[0]: 2}]  # slot 11 still needs offset 2
    assert data_count("accepted") - before == (3 if expose else 0)


def test_a_flush_that_closes_nothing_sends_ticks_and_commits_nothing(service):
    assign(service, 0)
    flush_at(service, 50.0)  # the first flush of a partition closes only the last closable slot
    flush_at(service, 50.5)
    kinds = [unpack(v)["kind"] for v in service._producer.values(service.topics.partials)]
    assert kinds == ["partial", "tick", "tick"]
    assert len(service._consumer.committed) == 1


def test_fetch_observations_set_the_lag_and_the_partitions_state(service):
    assign(service, 0, 1)
    wall = 1_000.0
    service._consumer.logs[0] += [b"e"] * 3  # partition 0 has 3 records not yet read
    service.collector.partitions[0].max_ts = wall - 30.0
    service.collector.partitions[1].max_ts = wall - 500.0  # at its end: no lag
    for p in (0, 1):
        service._consumer.polled_ms[tps(service, p)[0]] = int((wall - 0.5) * 1000)
    asyncio.run(service._observe(wall, {}))
    lag = metrics.REGISTRY.get_sample_value(
        "dpstream_consumer_lag_seconds", {"topic": service.source}
    )
    assert lag == pytest.approx(30.0)
    parts = service.collector.partitions
    assert parts[1].at_end and not parts[0].at_end
    assert parts[0].fetched_at == parts[1].fetched_at == wall - 0.5


def test_the_connection_follows_the_last_fetch_response(service):
    watch = IngestService._watch_connection.fun.__wrapped__  # one check, not the timer loop
    asyncio.run(watch(service))
    assert service.connected  # nothing assigned yet: no evidence either way
    assign(service, 0, 1)
    tp0, tp1 = tps(service, 0, 1)
    service._consumer.polled_ms[tp0] = int((time.time() - GAP_S - 5) * 1000)
    asyncio.run(watch(service))
    assert not service.connected  # the only fetch response is older than the gap
    service._consumer.polled_ms[tp1] = int((time.time() - 0.5) * 1000)
    asyncio.run(watch(service))
    assert service.connected  # one partition's recent response is enough
