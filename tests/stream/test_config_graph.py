"""A central stream running a (w,n) mechanism: the ``graph:`` key, its errors, ``ledger show``."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from app.dp.graph import Graph
from app.dp.registry import create
from app.dp.types import Group
from app.dp.wn import WN_RELATION
from app.dp.wn.checks import hop_balls
from app.stream.config import load_streams
from app.stream.errors import ConfigError
from app.stream.ops.ledger_view import render, to_json
from app.stream.records import encode_release, unpack
from app.stream.release import LedgerEntry

LEVELS = "[{name: std, w: 4, eps: 1.0}]"


def load(tmp_path, mechanism="stbd", graph="{grid: 2 x 3, n: 2}", d="d: 6", extra=""):
    cfg = tmp_path / "streams.yaml"
    graph_line = f"\n    graph: {graph}" if graph is not None else ""
    cfg.write_text(
        f"streams:\n  - id: g\n    {d}\n    mechanism: {mechanism}{graph_line}\n"
        f"    levels: {LEVELS}\n{extra}"
    )
    return load_streams(cfg, env={})[0]


def test_a_grid_graph_is_built_once_and_handed_to_every_mechanism(tmp_path):
    s = load(tmp_path, graph="{grid: 2 x 3, neighbours: 8, n: 2}", extra="    max_values: 3\n")
    a, b = s.build_mechanism(), s.build_mechanism()
    assert a.graph is s.graph.graph and b.graph is s.graph.graph  # not rebuilt per mechanism
    assert a.n == 2 and a.sensitivity == 6  # l = 3 values, replace: 2 l
    assert a.graph.edges() == Graph.grid(2, 3, neighbours=8).edges()
    assert s.graph.source == "grid 2 x 3, 8-neighbour"


def test_an_edge_list_names_labels_and_is_read_relative_to_the_streams_file(tmp_path):
    (tmp_path / "links.txt").write_text("# site links\nhome news\nnews, sport  # comment\n\n")
    s = load(
        tmp_path,
        mechanism="str",
        graph="{edges: links.txt, n: 3}",
        d="labels: [home, news, sport, shop]",
    )
    m = s.build_mechanism()
    assert m.graph.edges() == [[0, 1], [1, 2]] and m.n == 3
    assert type(m).__name__ == "STR"


def test_state_of_a_built_graph_loads_into_the_registry_built_twin(tmp_path):
    """The parameters of a mechanism given a built graph rebuild it (same fingerprint)."""
    m = load(tmp_path).build_mechanism()
    params = m.params()
    twin = create("stbd", **{**params, "groups": [Group(*g) for g in params["groups"]]})
    twin.load_state(m.state_dict())
    assert twin.graph.edges() == m.graph.edges()


def test_rescuedp_is_place_level_and_takes_no_graph(tmp_path):
    assert load(tmp_path, mechanism="rescuedp", graph=None).graph is None


@pytest.mark.parametrize(
    ("mechanism", "graph", "d", "files", "match"),
    [
        ("stbd", None, "d: 6", {}, r"stbd needs a graph"),
        ("pba", "{grid: 2 x 3, n: 2}", "d: 6", {}, r"only \(w,n\) mechanisms take a graph"),
        ("rescuedp", "{grid: 2 x 3, n: 2}", "d: 6", {}, r"place level"),
        ("stbd", "{grid: 2 x 3, n: 2}", "d: 5", {}, r"has 6 cells but the stream has d = 5"),
        ("stbd", "{grid: 2 by 3, n: 2}", "d: 6", {}, r"grid must be 'rows x cols'"),
        ("stbd", "{grid: 2 x 3, neighbours: 6, n: 2}", "d: 6", {}, r"neighbours must be 4 or 8"),
        ("stbd", "{grid: 2 x 3}", "d: 6", {}, r"graph.n must be an integer in \[1, 1000\]"),
        ("stbd", "{grid: 2 x 3, n: 0}", "d: 6", {}, r"graph.n must be an integer"),
        ("stbd", "{grid: 2 x 3, n: true}", "d: 6", {}, r"graph.n must be an integer"),
        ("stbd", "{grid: 2 x 3, n: 2, size: 3}", "d: 6", {}, r"unknown key\(s\) \['size'\]"),
        ("stbd", "{grid: 2 x 3, edges: e.txt, n: 2}", "d: 6", {}, r"exactly one of `edges`"),
        (
            "stbd",
            "{edges: e.txt, neighbours: 8, n: 2}",
            "labels: [a, b]",
            {"e.txt": "a b"},
            r"neighbours applies to a grid",
        ),
        ("stbd", "{edges: nope.txt, n: 2}", "labels: [a, b]", {}, r"cannot read edge list"),
        (
            "stbd",
            "{edges: e.txt, n: 2}",
            "labels: [a, b]",
            {"e.txt": "a b\na zz\n"},
            r"e.txt:2: 'zz' is not a label",
        ),
        (
            "stbd",
            "{edges: e.txt, n: 2}",
            "labels: [a, b]",
            {"e.txt": "a b c\n"},
            r"e.txt:1: expected two labels",
        ),
        (
            "{name: stbd, params: {n: 3}}",
            "{grid: 2 x 3, n: 2}",
            "d: 6",
            {},
            r"mechanism.params: name the graph and n under `graph:`",
        ),
    ],
)
def test_bad_graph_keys_fail_with_one_line_naming_the_field(
    tmp_path, mechanism, graph, d, files, match
):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        load(tmp_path, mechanism=mechanism, graph=graph, d=d)
    assert "\n" not in str(info.value) and "streams[0][g]" in str(info.value)


def test_ledger_show_reports_the_most_loaded_window(tmp_path):
    """The (w,n) line and ``window_report`` agree with Theorem 5's left side recomputed from the
    releases' per-page spending: max over centres of the sum over the last w slots of the max
    over the centre's n-range window."""
    s = load(tmp_path, graph="{grid: 2 x 3, n: 2}", d="labels: [a, b, c, d, e, f]")
    m = s.build_mechanism()
    rng = np.random.default_rng(7)
    counts = np.random.default_rng(8).integers(0, 50, (9, 1, 6))
    spent = np.array([m.step(c, rng).spent_cells for c in counts])  # (T, d) eps per page
    balls = hop_balls(m.graph, 2)  # (centre, page)
    per_window = np.array([[row[ball].max() for ball in balls] for row in spent[-4:]]).sum(0)
    centre = int(np.argmax(per_window))
    assert per_window.max() > 0
    report = m.window_report()
    assert [(r.w, r.eps) for r in report] == [(4, 1.0)]
    assert float(report[0].spent) == pytest.approx(per_window.max(), rel=1e-12)
    assert report[0].spent <= Fraction(1)

    entry = LedgerEntry(state=m.state_dict(), next_slot=10)
    text = render(s, entry)
    line = next(x for x in text.splitlines() if x.startswith("(w,n) window"))
    assert f"most loaded centred at {'abcdef'[centre]!r} (pages within 1 hops)" in line
    assert f"spent {per_window.max():.6g} of eps 1 over the last 4 slots" in line
    view = to_json(s, entry)["wn_window"]
    assert view["centre"] == "abcdef"[centre] and view["n"] == 2
    assert view["spent"] == pytest.approx(per_window.max(), rel=1e-12)


@pytest.mark.parametrize(
    ("mechanism", "graph", "neighbours", "n"),
    [
        ("stbd", "{grid: 2 x 3, n: 2}", "replace", 2),
        ("str", "{grid: 2 x 3, n: 3}", "add-remove", 3),
        ("rescuedp", None, "replace", 1),  # place level: the spatial window is one page
    ],
)
def test_issue_21_a_graph_streams_audit_record_names_the_wn_relation(
    tmp_path, mechanism, graph, neighbours, n
):
    """Issue 21 item 6: the audit record says a graph stream protects one (w,n) window."""
    s = load(tmp_path, mechanism=mechanism, graph=graph, extra=f"    neighbours: {neighbours}\n")
    m = s.build_mechanism()
    rel = m.step(np.ones((1, 6), dtype=np.int64), np.random.default_rng(0))
    _, audit, _ = encode_release(s, 1, rel, m.describe(), m.window_report(), [])
    au = unpack(audit)
    assert au["neighbours"] == f"{neighbours} {WN_RELATION}" == f"{neighbours} (w,n)"
    assert au["spatial_n"] == n and au["w_by_group"] == {"std": 4}


def test_a_central_streams_audit_record_keeps_its_relation(tmp_path):
    s = load(tmp_path, mechanism="ba", graph=None, extra="    neighbours: add-remove\n")
    m = s.build_mechanism()
    rel = m.step(np.ones((1, 6), dtype=np.int64), np.random.default_rng(0), population=[10])
    _, audit, _ = encode_release(s, 1, rel, m.describe(), m.window_report(), [])
    au = unpack(audit)
    assert au["neighbours"] == "add-remove" and "spatial_n" not in au
