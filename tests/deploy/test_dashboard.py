"""The Grafana dashboard (charts/dpstream/dashboards/dpstream.json): valid JSON, the panels the
issue asks for, every query on metrics app/metrics.py defines and a live worker exposes, and
every query valid PromQL on a real Prometheus."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.deploy.conftest import (
    DASHBOARD,
    exposed_names,
    metric_names_in,
    prom_query,
    run,
    tool,
)


def _panels(dashboard: dict) -> list[dict]:
    out = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out += panel.get("panels", [])  # collapsed rows keep their panels inside
    return out


def _exprs(dashboard: dict) -> list[tuple[str, str]]:
    exprs = [(p["title"], t["expr"]) for p in _panels(dashboard) for t in p.get("targets", [])]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            exprs.append((f"${var['name']}", var["query"]["query"]))
    return exprs


def test_dashboard_is_valid_json_with_unique_ids_and_a_datasource_variable(dashboard: dict) -> None:
    json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in _panels(dashboard)]
    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "dpstream" and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    for panel in _panels(dashboard):
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
            assert panel["targets"] and panel.get("description"), panel["title"]


def test_dashboard_shows_what_the_issue_asks(dashboard: dict) -> None:
    used = set().union(*(metric_names_in(e) for _, e in _exprs(dashboard)))
    assert {
        "dpstream_window_budget_spent",
        "dpstream_group_epsilon",  # budget vs eps
        "dpstream_window_budget_fraction",
        "dpstream_epsilon_spent_total",
        "dpstream_releases_total",  # fresh vs approximated
        "dpstream_dead_letters_total",
        "dpstream_slot_close_lag_seconds_bucket",
        "dpstream_release_latency_seconds_bucket",
        "dpstream_mechanism_step_seconds_bucket",
        "dpstream_consumer_lag_seconds",  # issue 15: lag in seconds, per topic
        "dpstream_watermark_seconds",  # issue 9: event-time progress
        "dpstream_slot_timeouts_total",
        "dpstream_late_partials_total",
        "dpstream_late_slots_total",  # issue 23: the default, count-free late signal
        "dpstream_release_lag_slots",  # issue 23: release lag behind the wall clock
        "dpstream_event_loop_lag_seconds",
        "dpstream_ready",
    } <= used


def test_dashboard_never_depends_on_exact_data_counts(dashboard: dict) -> None:
    """Exact counts of the users' data are an opt-in off by default (issue 9, item 1): the
    dashboard shows nothing that needs them, and no panel is left empty without them."""
    used = set().union(*(metric_names_in(e) for _, e in _exprs(dashboard)))
    assert not used & {"dpstream_events_total", "dpstream_reports_total"}
    assert "dpstream_consumer_lag" not in used  # replaced by dpstream_consumer_lag_seconds


def test_budget_panels_label_levels_by_name(dashboard: dict) -> None:
    budget = [
        (t, e)
        for t, e in _exprs(dashboard)
        if metric_names_in(e)
        & {
            "dpstream_window_budget_spent",
            "dpstream_window_budget_fraction",
            "dpstream_group_epsilon",
            "dpstream_epsilon_spent_total",
        }
    ]
    assert budget
    for title, expr in budget:
        assert "by (stream, level)" in expr, title
        assert "group)" not in expr, title


def test_panels_do_not_overlap(dashboard: dict) -> None:
    def cells(panels: list[dict]) -> list[tuple[int, int, str]]:
        out = []
        for p in panels:
            g = p["gridPos"]
            out += [
                (x, y, p["title"])
                for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])
            ]
        return out

    top = cells(dashboard["panels"])
    assert len({(x, y) for x, y, _ in top}) == len(top)
    assert all(x < 24 for x, _, _ in top)
    for row in dashboard["panels"]:
        if row.get("collapsed"):
            inner = cells(row["panels"])
            assert len({(x, y) for x, y, _ in inner}) == len(inner), row["title"]


def test_every_query_names_only_metrics_app_metrics_defines(dashboard: dict) -> None:
    known = exposed_names()
    for title, expr in _exprs(dashboard):
        names = metric_names_in(expr)
        assert names, f"{title}: query names no dpstream metric: {expr}"
        assert names <= known.keys(), f"{title}: unknown {names - known.keys()}"


def test_every_dashboard_metric_is_on_the_live_metrics_endpoint(
    dashboard: dict, live_families: dict
) -> None:
    known = exposed_names()
    for title, expr in _exprs(dashboard):
        for name in metric_names_in(expr):
            assert known[name] in live_families, f"{title}: {name} not served at /metrics"


def test_every_query_is_valid_promql_on_a_real_prometheus(dashboard: dict, prometheus: str) -> None:
    for _title, expr in _exprs(dashboard):
        prom_query(prometheus, _as_promql(expr))  # fails on a parse or evaluation error


def _as_promql(expr: str) -> str:
    """A dashboard query with Grafana's variables replaced, as Prometheus would receive it."""
    if expr.startswith("label_values("):
        metric = expr[len("label_values(") :].split(",")[0]
        expr = f"count by (stream) ({metric})"
    return expr.replace("$__rate_interval", "1m").replace("$__range", "1h").replace("$stream", ".*")


def test_every_query_parses_with_promtool(dashboard: dict, tmp_path: Path) -> None:
    """Offline: each query as a recording rule, checked by `promtool check rules` (the live
    test below also evaluates them on a real Prometheus)."""
    rules = [
        {"record": f"dashboard:q{i}", "expr": _as_promql(expr)}
        for i, (_title, expr) in enumerate(_exprs(dashboard))
    ]
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    out = run(tool("promtool"), "check", "rules", str(path)).stdout
    assert f"SUCCESS: {len(rules)} rules found" in out


def test_live_metrics_carry_no_exact_data_counts_by_default(live_families: dict) -> None:
    """The worker as compose and the chart run it (no DPSTREAM_EXPOSE_DATA_COUNTS) exports
    neither events nor reports by outcome, even after it consumed events (issue 9, item 1)."""
    assert "dpstream_releases" in live_families  # it did consume and release
    assert "dpstream_events" not in live_families
    assert "dpstream_reports" not in live_families
