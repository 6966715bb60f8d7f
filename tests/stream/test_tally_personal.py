"""The collect stage on personalized (PLDP-IDS) local streams: every user's own window.

PLPA+ with levels ``(w=6, eps=1)`` for 600 users and ``(w=2, eps=2)`` for 400 picks, by OPS, a
recycling window ``W = 2`` and splits level 0's budget in 4 shares: a level-0 user may report
4 times in any 6 slots, a level-1 user once in any 2. The collector must count exactly those
reports, whatever the requests ask (a request here asks everybody every slot, as a buggy or
forged planner would).
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from app.dp.local.wire import CollectionRequest
from app.stream.collect.tally import ReportCollector
from app.stream.records import encode_request
from tests.stream.conftest import report_rec

LEVEL0, LEVEL1 = 3, 700
"""A user of each level (indices in blocks: 0-599 are level 0, 600-999 level 1)."""


@pytest.fixture()
def setup(load_configs, local_stream):
    mech = {"name": "plpa+", "params": {"users": [600, 400]}}
    levels = [{"name": "private", "w": 6, "eps": 1.0}, {"name": "open", "w": 2, "eps": 2.0}]
    [stream] = load_configs(local_stream(mechanism=mech, levels=levels))
    c = ReportCollector([stream])
    c.assign(0)
    c.partitions[0] = True
    return c, stream, stream.build_mechanism()


def ask_everybody(stream: Any, m: Any, slot: int) -> bytes:
    request = {
        "mechanism": "plpa+",
        "slot": slot,
        "round": "dissimilarity",
        "d": 2,
        "buckets": m.n_buckets,
        "cohort": None,
        "oracle": ["grr", "grr"],
        "eps": list(m.report_eps),
        "units": list(m.report_units),
    }
    return encode_request(stream, 1000 + slot, float(slot), CollectionRequest.from_dict(request))


def report(slot: int, user: int, group: int) -> bytes:
    return msgpack.packb(
        {
            "stream": "loc",
            "mechanism": "plpa+",
            "slot": slot,
            "round": "dissimilarity",
            "user": user,
            "group": group,
            "oracle": "grr",
            "payload": [1],
        }
    )


def test_the_window_rule_follows_each_level_and_its_ops_shares(setup):
    c, stream, m = setup
    assert (m.window, tuple(m.shares)) == (2, (4, 1))  # OPS recycles faster than w = 6
    w, shares = m.report_windows()
    assert w.tolist() == [6, 2] and shares.tolist() == [4, 1]
    accepted: dict[int, list[int]] = {LEVEL0: [], LEVEL1: []}
    for slot in range(1, 10):
        c.add_request(ask_everybody(stream, m, slot))
        for user, group in ((LEVEL0, 0), (LEVEL1, 1)):
            c.add_batch(0, [report_rec(slot * 10 + group, report(slot, user, group))])
            if c.take_outcomes()["loc", "accepted"]:
                accepted[user].append(slot)
    # Level 0: 4 reports in any 6 slots (slots 1-4, then 7 once 1 left the window, ...).
    assert accepted[LEVEL0] == [1, 2, 3, 4, 7, 8, 9]
    # Level 1: one report in any 2 slots.
    assert accepted[LEVEL1] == [1, 3, 5, 7, 9]
    for user in accepted:
        s = accepted[user]
        level_w, level_s = (6, 4) if user == LEVEL0 else (2, 1)
        assert all(sum(t - level_w < x <= t for x in s) <= level_s for t in s)


def test_a_user_reporting_under_another_level_is_not_asked(setup):
    c, stream, m = setup
    c.add_request(ask_everybody(stream, m, 1))
    c.add_batch(0, [report_rec(0, report(1, LEVEL0, 1)), report_rec(1, report(1, LEVEL1, 0))])
    out = c.take_outcomes()
    assert out["loc", "not_asked"] == 2 and out["loc", "accepted"] == 0


def test_a_non_personalized_stream_holds_everybody_to_the_strictest_window(
    load_configs, local_stream
):
    levels = [{"name": "a", "w": 5, "eps": 1.0}, {"name": "b", "w": 2, "eps": 0.5}]
    [stream] = load_configs(local_stream(levels=levels))
    w, shares = stream.build_local().report_windows()
    assert w.tolist() == [5] and shares.tolist() == [1]
