"""The streams file's ``privacy:`` section: units of streams that share users, their bound
(docs/design.md invariant 9) on every stream, in ``/budget``, the status page and audit records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.stream.config import DEFAULT_STREAMS, load_streams
from app.stream.errors import ConfigError
from app.stream.ops.budget_view import budget_json
from app.stream.ops.status import StatusBoard
from app.stream.records import encode_release, unpack

STREAMS = """
streams:
  - {id: views, d: 4, slot_s: 60, mechanism: uniform, levels: [{name: a, w: 10, eps: 1.0}]}
  - id: buys
    d: 4
    slot_s: 3600
    neighbours: add-remove
    mechanism: sample
    levels: [{name: a, w: 2, eps: 0.5}]
  - id: app
    mode: local
    d: 4
    slot_s: 300
    round_s: 60
    mechanism: {name: lbu, params: {users: 1000}}
    levels: [{name: a, w: 4, eps: 1.0}]
"""


def load(tmp_path, privacy: str = ""):
    path = tmp_path / "streams.yaml"
    path.write_text(STREAMS + privacy)
    return {s.id: s for s in load_streams(path, env={})}


def test_by_default_central_streams_share_one_unit_and_local_ones_stand_alone(tmp_path):
    streams = load(tmp_path)
    central = streams["views"].unit
    assert central is streams["buys"].unit and central.unit == "central"
    assert central.interval_s == 86_400.0
    # views: 60 s slots, a day touches 1441, in windows of 10 at eps 1 (replace)
    # buys: 3600 s slots, 25 touched, windows of 2 at eps 0.5, add-remove counts double
    expected = math.ceil(1441 / 10) * 1.0 + math.ceil(25 / 2) * 0.5 * 2
    assert central.eps == pytest.approx(expected)
    assert streams["app"].unit.unit == "app" and [t.stream for t in streams["app"].unit.terms] == [
        "app"
    ]


def test_configured_units_and_interval(tmp_path):
    streams = load(
        tmp_path,
        "privacy:\n  interval_s: 7200\n  units:\n    - {name: people, streams: [views, app], "
        "cap_eps: 100}\n",
    )
    people = streams["views"].unit
    assert people is streams["app"].unit and people.cap_eps == 100
    # views: 121 slots in 2 h -> 13 windows; app: 25 slots -> 7 windows of 4 at eps 1
    assert people.eps == pytest.approx(13 * 1.0 + 7 * 1.0)
    assert streams["buys"].unit.unit == "buys"  # not listed: a unit of its own


@pytest.mark.parametrize(
    ("privacy", "match"),
    [
        ("privacy: {units: [{name: u, streams: [nope]}]}", "no stream 'nope'"),
        (
            "privacy: {units: [{name: u, streams: [views]}, {name: v, streams: [views]}]}",
            "already in unit 'u'",
        ),
        ("privacy: {interval_s: 0}", "interval_s"),
        ("privacy: {colour: red}", "unknown key"),
        ("privacy: {units: [{name: u, streams: [views, buys], cap_eps: 10}]}", "above cap_eps 10"),
    ],
)
def test_mistakes_and_a_bound_above_its_cap_are_refused(tmp_path, privacy, match):
    with pytest.raises(ConfigError, match=match):
        load(tmp_path, privacy + "\n")


def test_budget_status_page_and_audit_record_carry_the_bound():
    (stream,) = load_streams(DEFAULT_STREAMS, env={})
    mech = stream.build_mechanism()
    counts = np.zeros((len(stream.levels), stream.d), dtype=np.int64)
    population = [lv.population for lv in stream.levels]
    rel = mech.step(counts, np.random.default_rng(0), population=population)
    window = mech.window_report()
    view = budget_json(stream, window, None)
    assert view["privacy_unit"]["bound_eps"] == stream.unit.eps > 0
    assert view["privacy_unit"]["streams"]["clicks"]["slots"] == 86_400 // 2 + 1
    board = StatusBoard()
    board.on_report(stream, window, [])
    assert f"eps <b>{stream.unit.eps:g}</b>" in board.render_page()
    assert board.budget_document()["privacy_units"] == [stream.unit.as_json()]
    _, audit, _ = encode_release(stream, 0, rel, mech.describe(), window, [])
    assert unpack(audit)["privacy_unit"] == stream.unit.as_json()
