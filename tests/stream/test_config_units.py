"""The streams file's ``privacy:`` section: units of streams that share users, their bound
(docs/design.md invariant 9) on every stream, in ``/budget``, the status page and audit records."""

from __future__ import annotations

import math
from pathlib import Path
from tempfile import TemporaryDirectory

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.config import DEFAULT_STREAMS, load_streams
from app.stream.errors import ConfigError
from app.stream.ops.budget_view import budget_json
from app.stream.ops.status import StatusBoard
from app.stream.records import encode_open_release, encode_release, unpack

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


OPEN = """
streams:
  - {id: views, d: 4, slot_s: 60, mechanism: uniform, levels: [{name: a, w: 10, eps: 1.0}]}
  - id: urls
    domain: open
    slot_s: 30
    max_keys: 2
    mechanism: open_uniform
    levels: [{name: std, w: 3, eps: 3.0, delta: 3.0e-4, population: 100000}]
  - id: terms
    domain: open
    slot_s: 7
    neighbours: add-remove
    mechanism: open_uniform
    levels: [{name: std, w: 5, eps: 1.0, delta: 1.0e-5, population: 100000}]
"""


def load_open(tmp_path: Path, privacy: str) -> dict[str, object]:
    path = tmp_path / "streams.yaml"
    path.write_text(OPEN + privacy)
    return {s.id: s for s in load_streams(path, env={})}


def test_open_streams_add_their_delta_to_the_unit(tmp_path):
    """Per open stream ``ceil(k / w) * delta``, an add-remove one doubled (its mechanism is
    calibrated for add-remove: app.dp.units), the labels stream none."""
    unit = load_open(tmp_path, "privacy: {interval_s: 3600}\n")["views"].unit
    # urls: 30 s slots, 121 touched, windows of 3; terms: 7 s slots, 516 touched, windows of 5
    assert unit.delta == pytest.approx(math.ceil(121 / 3) * 3e-4 + math.ceil(516 / 5) * 1e-5 * 2)
    assert unit.eps == pytest.approx(7 * 1.0 + 41 * 3.0 + 104 * 1.0 * 2)
    shown = unit.as_json()
    assert shown["bound_delta"] == unit.delta and shown["cap_delta"] is None
    assert "delta" not in shown["streams"]["views"]
    assert shown["streams"]["urls"]["delta"] == pytest.approx(41 * 3e-4)


def test_a_unit_delta_above_its_cap_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="above cap_delta 0.001") as err:
        load_open(
            tmp_path,
            "privacy: {interval_s: 3600, units: [{name: u, streams: "
            "[urls, terms], cap_delta: 1.0e-3}]}\n",
        )
    assert "\n" not in str(err.value) and "up to delta 0.01438 in 3600 s" in str(err.value)
    streams = load_open(
        tmp_path,
        "privacy: {interval_s: 3600, units: [{name: u, streams: [urls, terms], "
        "cap_delta: 0.02}]}\n",
    )
    assert streams["urls"].unit.cap_delta == 0.02
    with pytest.raises(ConfigError, match="cap_delta must be a number"):
        load_open(tmp_path, "privacy: {units: [{name: u, streams: [urls], cap_delta: 2}]}\n")


def brute_unit(
    streams: list[tuple[int, int, float, float, int]], interval: int
) -> tuple[float, float]:
    """The most eps and the most delta one user loses in any interval of ``interval`` s across
    single-level streams ``(slot_s, w, eps, delta, factor)`` (integer seconds): a plain loop
    over every placement of the interval and, per stream, every ledger that spends its whole
    window budget on one slot of each ``w`` (one per phase; each window of ``w`` holds one)."""
    period = math.lcm(*(s for s, *_ in streams))
    best_eps = best_delta = 0.0
    for half in range(-2, 2 * period):
        t = half / 2  # the slots an interval touches change only at whole seconds
        eps = delta = 0.0
        for slot_s, w, e, d, factor in streams:
            slots = range(-2, (2 * period + interval) // slot_s + 2)
            touched = [j for j in slots if j * slot_s < t + interval and (j + 1) * slot_s > t]
            spent = max(sum(1 for j in touched if j % w == phase) for phase in range(w))
            eps += spent * e * factor
            delta += spent * d * factor
        best_eps, best_delta = max(best_eps, eps), max(best_delta, delta)
    return best_eps, best_delta


SLOT_S = [1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60]


@st.composite
def open_units(draw: st.DrawFn) -> tuple[str, list[tuple[int, int, float, float, int]]]:
    streams, text = [], "streams:\n"
    if draw(st.booleans()):  # a labels stream in the unit: no delta
        text += (
            "  - {id: l, d: 2, slot_s: 5, mechanism: uniform, levels: [{name: a, w: 2, eps: 1}]}\n"
        )
    for i in range(draw(st.integers(1, 3))):
        slot_s, w = draw(st.sampled_from(SLOT_S)), draw(st.integers(1, 8))
        eps, delta = (
            draw(st.sampled_from([0.5, 1.0, 2.0])),
            draw(st.sampled_from([1e-6, 1e-5, 4e-4])),
        )
        relation = draw(st.sampled_from(["replace", "add-remove"]))
        text += (
            f"  - {{id: o{i}, domain: open, slot_s: {slot_s}, neighbours: {relation}, "
            f"mechanism: open_uniform, levels: [{{name: std, w: {w}, eps: {eps}, "
            f"delta: {delta:.1e}, population: 1000000}}]}}\n"
        )
        streams.append((slot_s, w, eps, delta, 2 if relation == "add-remove" else 1))
    return text, streams


@settings(max_examples=60, deadline=None)
@given(open_units(), st.integers(1, 200))
def test_unit_delta_equals_a_brute_force_over_sliding_windows(case, interval):
    text, streams = case
    with TemporaryDirectory() as tmp:
        path = Path(tmp) / "streams.yaml"
        path.write_text(text + f"privacy: {{interval_s: {interval}}}\n")
        (unit,) = {s.unit for s in load_streams(path, env={})}
    eps, delta = brute_unit(streams, interval)
    assert unit.delta == pytest.approx(delta, rel=1e-12)
    labels = [t.loss for t in unit.terms if t.delta is None]
    assert unit.eps - math.fsum(labels) == pytest.approx(eps, rel=1e-12)


def test_a_labels_only_unit_keeps_its_record_bytes():
    """No open stream: delta 0, and the audit record's unit field has exactly the keys it had
    before (no delta key anywhere in the record's bytes)."""
    (stream,) = load_streams(DEFAULT_STREAMS, env={})
    assert stream.unit.delta == 0.0 and not stream.unit.states_delta
    mech = stream.build_mechanism()
    counts = np.zeros((len(stream.levels), stream.d), dtype=np.int64)
    population = [lv.population for lv in stream.levels]
    rel = mech.step(counts, np.random.default_rng(0), population=population)
    _, audit, _ = encode_release(stream, 0, rel, mech.describe(), mech.window_report(), [])
    unit = msgpack.unpackb(audit)["privacy_unit"]
    assert list(unit) == ["unit", "interval_s", "bound_eps", "cap_eps", "relation", "streams"]
    assert list(unit["streams"]["clicks"]) == ["slots", "eps"]
    assert b"delta" not in audit
    assert "delta" not in unit_line(stream)


def unit_line(stream) -> str:
    """The status page's privacy-unit line for ``stream``."""
    board = StatusBoard()
    board.on_report(stream, stream.build_mechanism().window_report(), [])
    page = board.render_page()
    return page[page.index("Privacy unit") :].split("</p>")[0]


def test_budget_status_page_and_audit_record_carry_the_unit_delta(tmp_path):
    streams = load_open(
        tmp_path,
        "privacy: {interval_s: 3600, units: [{name: u, streams: [views, urls, terms], "
        "cap_delta: 0.02}]}\n",
    )
    stream = streams["urls"]
    unit = stream.unit
    mech = stream.build_open()
    rel = mech.step(
        np.array([1, 2], dtype=np.int64), np.array(["a", "b"]), np.random.default_rng(0)
    )
    window = mech.window_report()
    assert budget_json(stream, window, 0)["privacy_unit"]["bound_delta"] == unit.delta
    board = StatusBoard()
    board.on_report(stream, window, [])
    assert f"delta <b>{unit.delta:g}</b> (cap delta 0.02)" in board.render_page()
    _, audit, _ = encode_open_release(stream, 0, rel, mech.describe(), window, [])
    shown = unpack(audit)["privacy_unit"]
    assert shown == unit.as_json() and shown["bound_delta"] == unit.delta > 0
