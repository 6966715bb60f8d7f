"""Alert rules and the Prometheus configuration: promtool checks, rule unit tests, and a real
Prometheus scraping dpstream's /metrics and evaluating the rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from tests.deploy.conftest import (
    ALERTS,
    COMPOSE_STREAMS,
    ROOT,
    LiveWorker,
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
    prometheus: str, live_worker: LiveWorker
) -> None:
    target = live_worker.target

    def dpstream_target_up() -> bool:
        targets = json.loads(http_get(f"{prometheus}/api/v1/targets"))["data"]["activeTargets"]
        return any(
            t["labels"]["job"] == "dpstream"
            and t["scrapeUrl"] == f"http://{target}/metrics"
            and t["health"] == "up"
            for t in targets
        )

    wait_for(dpstream_target_up, 20, "the dpstream target to be up")
    levels = yaml.safe_load(COMPOSE_STREAMS.read_text())["streams"][0]["levels"]
    eps = wait_for(lambda: prom_query(prometheus, "dpstream_group_epsilon"), 10, "scraped samples")
    assert {(s["metric"]["group"], float(s["value"][1])) for s in eps} == {
        (str(i), float(level["eps"])) for i, level in enumerate(levels)
    }
    # The worker releases every (1 s) slot: the no-release expression is empty, and the same
    # quantity the rule compares stays under two slots.
    rules = {r["alert"]: r for r in _rules()}
    assert prom_query(prometheus, rules["DpstreamNoRelease"]["expr"]) == []
    (lag,) = prom_query(
        prometheus,
        "(time() - max without (instance, pod) (dpstream_last_release_timestamp_seconds))"
        " / max without (instance, pod) (dpstream_slot_seconds)",
    )
    assert lag["metric"]["stream"] == live_worker.stream and float(lag["value"][1]) < 2
    assert prom_query(prometheus, rules["DpstreamWorkerDown"]["expr"]) == []

    # Undecodable input goes to dead-letter; once scraped, the rising-dead-letters rule is pending.
    live_worker.produce([(b"bad", b"\xc1 not msgpack")])
    by_name: dict[str, dict] = {}

    def evaluated() -> bool:
        groups = json.loads(http_get(f"{prometheus}/api/v1/rules"))["data"]["groups"]
        by_name.update({r["name"]: r for g in groups for r in g["rules"]})
        return all(r["lastEvaluation"] > "0001-01-01T00:00:00Z" for r in by_name.values()) and (
            by_name.get("DpstreamDeadLettersRising", {}).get("state") == "pending"
        )

    wait_for(evaluated, 30, "the rules to be evaluated and DpstreamDeadLettersRising pending")
    assert by_name.keys() == rules.keys()
    assert all(r["health"] == "ok" for r in by_name.values()), [
        (r["name"], r.get("lastError")) for r in by_name.values()
    ]
    assert by_name["DpstreamNoRelease"]["state"] == "inactive"
    assert (
        by_name["DpstreamWorkerDown"]["state"]
        == by_name["DpstreamWorkerAbsent"]["state"]
        == "inactive"
    )
    (dead,) = prom_query(prometheus, "sum(dpstream_dead_letters_total)")
    assert float(dead["value"][1]) >= 1
