"""``app.stream.collect.reports.ReportService`` on in-memory clients (``fake_kafka``), no broker.

What runs here: the tick interval, the ``collection-requests`` side input (a bad request is
logged and skipped), the detection of a report for a round not read yet, one turn of the
consume loop, and the flush (tallies, then one tick per local stream, then the commit).
Building the real clients (``on_start``) and the group's rebalancing need a broker:
``tests/integration`` covers them.
"""

from __future__ import annotations

import asyncio
import logging
import time

import msgpack
import numpy as np
import pytest
from aiokafka import TopicPartition

from app import metrics
from app.stream.collect.reports import ReportService
from app.stream.records import encode_request, unpack
from app.stream.topics import load_topics


@pytest.mark.parametrize(
    ("rounds", "expected"), [((2.0,), 0.25), ((0.4,), 0.1), ((0.1,), 0.05), ((3.0, 0.6), 0.15)]
)
def test_tick_interval_is_a_quarter_of_the_shortest_round_within_bounds(
    make_settings, local_stream, central_stream, rounds, expected
):
    streams = [local_stream(id=f"l{i}", round_s=r) for i, r in enumerate(rounds)]
    central = central_stream(slot_s=0.1)  # central slots do not count
    svc = ReportService(make_settings(central, *streams), load_topics(), group_id="g")
    assert svc.tick_s == pytest.approx(expected)


@pytest.fixture
def service(make_settings, local_stream, fake_kafka):
    topics = load_topics()
    total = topics.spec("reports").partitions
    svc = ReportService(make_settings(local_stream()), topics, group_id="g")
    svc._consumer = fake_kafka.Consumer(topics.reports, {p: [] for p in range(total)})
    svc._side = fake_kafka.Consumer(topics.collection_requests, {0: []})
    svc._producer = fake_kafka.Producer()
    return svc


def assign(svc, *parts):
    tps = [TopicPartition(svc.source, p) for p in parts]
    svc._consumer.assign(tps)
    asyncio.run(svc.on_assigned(tps))


def request(svc, deadline, seed=0):
    """The stream's first collection request, and its ``collection-requests`` value."""
    (stream,) = svc.settings.streams
    req = stream.build_mechanism().open_slot(np.random.default_rng(seed))
    return req, encode_request(stream, 100, deadline, req)


def report(req, user, value):
    return msgpack.packb(
        {
            "stream": "loc",
            "slot": req.slot,
            "round": req.round,
            "user": user,
            "group": 0,
            "payload": [value],
        }
    )


def test_a_request_is_learnt_and_a_bad_one_is_logged_and_skipped(service, fake_kafka, caplog):
    req, raw = request(service, deadline=50.0)
    with caplog.at_level(logging.ERROR, logger="app.stream.collect.reports"):
        service._apply_side_input(fake_kafka.Rec("collection-requests", 0, 0, None, b"\xc1"))
    assert "unreadable collection request offset=0" in caplog.text
    assert service.collector.newest("loc") is None
    service._apply_side_input(fake_kafka.Rec("collection-requests", 0, 1, None, raw))
    assert service.collector.newest("loc") == (req.slot, 0)


def test_a_report_for_a_round_not_read_yet_is_detected(service, fake_kafka):
    req, raw = request(service, deadline=50.0)

    def recs(*values):
        return [fake_kafka.Rec("reports", 0, i, None, v) for i, v in enumerate(values)]

    assert service._unknown_round(recs(report(req, 1, 0)))  # nothing known yet
    service._apply_side_input(fake_kafka.Rec("collection-requests", 0, 0, None, raw))
    assert not service._unknown_round(recs(report(req, 1, 0)))
    later = dict(msgpack.unpackb(report(req, 1, 0)), slot=req.slot + 1)
    assert service._unknown_round(recs(report(req, 1, 0), msgpack.packb(later)))
    # only the newest report of a batch is looked at
    assert not service._unknown_round(recs(msgpack.packb(later), report(req, 1, 0)))
    other = dict(msgpack.unpackb(report(req, 1, 0)), stream="other", slot=req.slot + 1)
    assert not service._unknown_round(recs(msgpack.packb(other)))
    assert not service._unknown_round(recs(b"\xc1"))
    assert not service._unknown_round([])


def test_a_new_round_of_one_stream_before_a_known_round_of_another_is_detected(
    service, fake_kafka, monkeypatch
):
    """Issue 23 item 9: two local streams share the reports partitions, so a batch's last
    report can name a known round of one stream while the other stream's new round came just
    before; each stream's newest report is looked at."""
    req, raw = request(service, deadline=50.0)
    service._apply_side_input(fake_kafka.Rec("collection-requests", 0, 0, None, raw))
    newest = dict(service.collector.rounds)
    monkeypatch.setattr(service.collector, "streams", {**service.collector.streams, "b": None})

    def recs(*values):
        return [fake_kafka.Rec("reports", 0, i, None, v) for i, v in enumerate(values)]

    other = msgpack.packb(dict(msgpack.unpackb(report(req, 1, 0)), stream="b"))
    assert service._unknown_round(recs(other, report(req, 1, 0)))  # b: no round known
    assert service.collector.rounds == newest


async def consume_once(svc):
    """One turn of the consume loop: the service stops after its first poll."""
    svc._consumer.stop_after_first_poll(svc)
    await ReportService._consume.fun(svc)


def data_count(outcome):
    value = metrics.DATA_REGISTRY.get_sample_value(
        "dpstream_reports_total", {"stream": "loc", "outcome": outcome}
    )
    return value or 0.0


def test_one_turn_counts_reports_then_the_deadline_closes_the_round(service):
    deadline = time.time() + 3600  # the loop's own flush must not close the round
    req, raw = request(service, deadline)
    asked = [u for u in range(60) if req.asks(u)]
    service._side.logs[0].append(raw)
    service._consumer.logs[0] += [report(req, u, u % 2) for u in asked] + [b"\xc1"]
    assign(service, 0)
    before = data_count("accepted")

    async def turn_then_deadline():
        await consume_once(service)  # its flush finds the round open: a tick, no tally
        assert service._consumer.committed == []
        await service._flush(deadline)  # one event loop: the dead letter's send is awaited

    asyncio.run(turn_then_deadline())
    (dead,) = service._producer.values(service.topics.dead_letter)
    assert unpack(dead)["reason"] == "undecodable" and unpack(dead)["offset"] == len(asked)
    out = [unpack(v) for v in service._producer.values(service.topics.partials)]
    assert [m["kind"] for m in out] == ["tick", "tally", "tick"]
    tally = out[1]
    assert (tally["slot"], tally["round"], tally["partition"]) == (req.slot, req.round, 0)
    assert tally["partitions"] == service.topics.spec("reports").partitions
    assert tally["reports"] == [len(asked)] and tally["now"] == deadline
    ones = sum(u % 2 for u in asked)
    assert tally["support"] == [len(asked) - ones, ones]  # GRR support of the values sent
    tp = TopicPartition(service.source, 0)
    assert service._consumer.committed == [{tp: len(asked) + 1}]
    assert data_count("accepted") == before  # exact counts only with the opt-in


def test_with_the_opt_in_the_flush_counts_reports(make_settings, local_stream, fake_kafka):
    topics = load_topics()
    settings = make_settings(local_stream(), DPSTREAM_EXPOSE_DATA_COUNTS="true")
    svc = ReportService(settings, topics, group_id="g")
    svc._consumer = fake_kafka.Consumer(topics.reports, {0: []})
    svc._producer = fake_kafka.Producer()
    req, raw = request(svc, deadline=10.0)
    svc._apply_side_input(fake_kafka.Rec("collection-requests", 0, 0, None, raw))
    assign(svc, 0)
    svc.collector.partitions[0] = True
    user = next(u for u in range(60) if req.asks(u))
    svc.collector.add_batch(0, [fake_kafka.Rec("reports", 0, 0, None, report(req, user, 1))])
    before = data_count("accepted")
    asyncio.run(svc._flush(10.0))
    assert data_count("accepted") == before + 1
