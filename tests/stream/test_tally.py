"""The local-mode collect stage without a broker: membership, window, late, tallies."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from app.dp.local import LBU, LPU
from app.dp.local.wire import CollectionRequest
from app.stream.collect.tally import ReportCollector
from app.stream.records import encode_request
from tests.stream.conftest import report_rec

USERS = 40
LABELS = ["a", "b", "c"]


@pytest.fixture()
def setup(load_configs, local_stream):
    lpu = {"name": "lpu", "params": {"users": USERS, "oracle": "grr"}}
    lbu = {"name": "lbu", "params": {"users": USERS, "oracle": "oue"}}
    configs = load_configs(
        local_stream(labels=LABELS, mechanism=lpu),
        local_stream(id="bud", labels=LABELS, mechanism=lbu),
    )
    streams = {s.id: s for s in configs}
    c = ReportCollector(streams.values())
    c.assign(0)
    c.partitions[0] = True
    return c, streams


def request_of(streams, mech, sid, wall_slot, deadline, rng):
    req = mech.open_slot(rng)
    return req, encode_request(streams[sid], wall_slot, deadline, req)


def report(sid, req, user, payload, group=0):
    return msgpack.packb(
        {
            "stream": sid,
            "mechanism": req.mechanism,
            "slot": req.slot,
            "round": req.round,
            "user": user,
            "group": group,
            "oracle": req.oracle[0],
            "payload": payload,
        }
    )


def test_only_asked_users_count_once_and_the_tally_sums_their_support(setup):
    c, streams = setup
    mech = LPU(d=3, eps=1.0, w=3, users=USERS)
    req, raw = request_of(streams, mech, "loc", 100, 50.0, np.random.default_rng(0))
    c.add_request(raw)
    asked = [u for u in range(USERS) if req.asks(u)]
    other = next(u for u in range(USERS) if not req.asks(u))
    honest, liar = asked[:-1], asked[-1]
    recs = [report_rec(i, report("loc", req, u, [u % 3])) for i, u in enumerate(honest)]
    recs.append(report_rec(100, report("loc", req, asked[0], [1])))  # a second report: window_used
    recs.append(report_rec(101, report("loc", req, other, [0])))  # not in the cohort
    recs.append(report_rec(102, report("loc", req, USERS + 5, [0])))  # not registered
    recs.append(report_rec(103, report("loc", req, liar, [7])))  # not a GRR report for d = 3
    recs.append(report_rec(104, b"\xc1"))  # undecodable
    stale = dict(msgpack.unpackb(report("loc", req, asked[2], [0])), slot=req.slot + 5)
    recs.append(report_rec(105, msgpack.packb(stale)))  # a slot never requested
    bad = c.add_batch(0, recs)
    assert sorted(e.reason for e, _ in bad) == ["out_of_domain", "undecodable"]
    out = c.take_outcomes()
    assert out["loc", "accepted"] == len(honest)
    assert out["loc", "window_used"] == 1
    assert out["loc", "not_asked"] == 2
    assert out["loc", "wrong_slot"] == 1
    assert c.flush(49.9) == []  # before the deadline nothing closes
    assert c.commit_offset(0, 200) == 0
    [t] = c.flush(50.0)
    expected = np.bincount([u % 3 for u in honest], minlength=3)
    assert (t.stream, t.slot, t.rnd, t.partition) == ("loc", req.slot, req.round, 0)
    assert t.support == expected.tolist() and t.reports == [len(honest)]
    assert c.commit_offset(0, 200) == 200
    # After the round closed in this partition, its reports are late.
    c.add_batch(0, [report_rec(201, report("loc", req, asked[3], [0]))])
    assert c.take_outcomes()["loc", "late"] == 1
    assert c.flush(60.0) == []


def test_population_division_drops_a_user_within_its_window(setup):
    c, streams = setup
    mech = LPU(d=3, eps=1.0, w=3, users=USERS)
    rng = np.random.default_rng(1)
    req1, raw1 = request_of(streams, mech, "loc", 100, 5.0, rng)
    c.add_request(raw1)
    user = next(u for u in range(USERS) if req1.asks(u))
    c.add_batch(0, [report_rec(0, report("loc", req1, user, [0]))])
    c.flush(5.0)
    mech.on_tally(mech_tally(req1, mech), rng)
    mech.close_slot()
    # A (buggy or forged) request of the next slot that names the same user again.
    forged = dict(mech.open_slot(rng).to_dict(), cohort=req1.cohort)
    c.add_request(encode_request(streams["loc"], 101, 15.0, CollectionRequest.from_dict(forged)))
    again = dict(msgpack.unpackb(report("loc", req1, user, [0])), slot=forged["slot"])
    c.add_batch(0, [report_rec(1, msgpack.packb(again))])
    assert c.take_outcomes()["loc", "window_used"] == 1


def mech_tally(req, mech):
    from app.dp.local.wire import Tally

    return Tally(req.slot, req.round, np.zeros((1, mech.d), dtype=np.int64), [0])


def test_budget_division_takes_one_report_per_round_from_everybody(setup):
    c, streams = setup
    mech = LBU(d=3, eps=1.0, w=3, users=USERS, oracle="oue")
    req, raw = request_of(streams, mech, "bud", 7, 1.0, np.random.default_rng(2))
    c.add_request(raw)
    recs = [report_rec(u, report("bud", req, u, [u % 3, (u + 1) % 3])) for u in range(USERS)]
    recs += [report_rec(USERS, report("bud", req, 0, [0]))]
    c.add_batch(0, recs)
    out = c.take_outcomes()
    assert out["bud", "accepted"] == USERS and out["bud", "window_used"] == 1
    [t] = c.flush(1.0)
    assert t.reports == [USERS] and sum(t.support) == 2 * USERS
