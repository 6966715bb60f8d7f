"""Alert rules and the Prometheus configuration: promtool checks, rule unit tests, and a real
Prometheus scraping dpstream's /metrics and evaluating the rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.deploy.conftest import (
    ALERTS,
    ROOT,
    exposed_names,
    http_get,
    metric_names_in,
    prom_query,
    run,
    tool,
    wait_for,
)

RULES_TEST = ROOT / "deploy" / "prometheus" / "alerts_test.yaml"


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def test_promtool_check_rules() -> None:
    out = run(tool("promtool"), "check", "rules", str(ALERTS)).stdout
    assert f"SUCCESS: {len(_rules())} rules found" in out


def test_promtool_check_config_with_the_rules_as_compose_mounts_them(tmp_path: Path) -> None:
    shutil.copy(ROOT / "deploy" / "prometheus" / "prometheus.yml", tmp_path / "prometheus.yml")
    (tmp_path / "rules").mkdir()
    shutil.copy(ALERTS, tmp_path / "rules" / "dpstream-alerts.yaml")
    out = run(tool("promtool"), "check", "config", str(tmp_path / "prometheus.yml"))
    text = out.stdout + out.stderr
    assert "SUCCESS: 1 rule files found" in text and f"SUCCESS: {len(_rules())} rules found" in text


def test_promtool_rule_unit_tests() -> None:
    out = run(tool("promtool"), "test", "rules", str(RULES_TEST))
    assert "SUCCESS" in out.stdout


def test_issue_alerts_exist_and_use_defined_metrics() -> None:
    rules = {r["alert"]: r for r in _rules()}
    assert {
        "DpstreamBudgetExhausted",
        "DpstreamBudgetNearlyExhausted",
        "DpstreamNoRelease",
        "DpstreamDeadLettersRising",
        "DpstreamWorkerDown",
    } <= rules.keys()
    known = exposed_names()
    for rule in rules.values():
        assert metric_names_in(rule["expr"]) <= known.keys(), rule["alert"]
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_real_prometheus_scrapes_the_worker_and_evaluates_the_rules(
    prometheus: str, metrics_target: str
) -> None:
    def dpstream_target_up() -> bool:
        targets = json.loads(http_get(f"{prometheus}/api/v1/targets"))["data"]["activeTargets"]
        return any(
            t["labels"]["job"] == "dpstream"
            and t["scrapeUrl"] == f"http://{metrics_target}/metrics"
            and t["health"] == "up"
            for t in targets
        )

    wait_for(dpstream_target_up, 20, "the dpstream target to be up")
    eps = wait_for(lambda: prom_query(prometheus, "dpstream_group_epsilon"), 10, "scraped samples")
    assert {(s["metric"]["group"], s["value"][1]) for s in eps} == {("0", "0.5"), ("1", "1")}

    # The no-release rule's own expression: the stand-in released 300 s ago, with 10 s slots.
    no_release = next(r for r in _rules() if r["alert"] == "DpstreamNoRelease")
    (sample,) = prom_query(prometheus, no_release["expr"])
    assert sample["metric"]["stream"] == "standin" and sample["metric"]["job"] == "dpstream"
    assert float(sample["value"][1]) >= 300
    # Worker down is false while the target is up.
    down = next(r for r in _rules() if r["alert"] == "DpstreamWorkerDown")
    assert prom_query(prometheus, down["expr"]) == []

    def all_rules_evaluated() -> list[dict] | None:
        groups = json.loads(http_get(f"{prometheus}/api/v1/rules"))["data"]["groups"]
        rules = [r for g in groups for r in g["rules"]]
        done = all(r["lastEvaluation"] > "0001-01-01T00:00:00Z" for r in rules) and any(
            r["name"] == "DpstreamNoRelease" and r["state"] != "inactive" for r in rules
        )
        return rules if done else None

    rules = wait_for(all_rules_evaluated, 20, "every rule to be evaluated")
    assert len(rules) == len(_rules())
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]
    states = {r["name"]: r["state"] for r in rules}
    assert states["DpstreamNoRelease"] == "pending"  # true now, fires after `for: 1m`
    assert states["DpstreamDeadLettersRising"] == "inactive"  # the counter has not moved since
    assert states["DpstreamBudgetExhausted"] == "pending"  # group 0 spent 0.5 of 0.5
    assert states["DpstreamWorkerDown"] == states["DpstreamWorkerAbsent"] == "inactive"
