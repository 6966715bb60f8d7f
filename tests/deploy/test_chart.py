"""Helm chart charts/dpstream: lint, render, validate the manifests offline, schema rejections.

Values sets are the defaults plus every charts/dpstream/ci/*.yaml (chart-testing's layout).
Core kinds are checked by kubernetes-validate --strict; the prometheus-operator kinds, which it
has no schema for, by the CRD models in .tools/python (unknown keys rejected by a round trip),
and the PrometheusRule's rules by promtool.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.stream.config import parse_noise_key
from tests.deploy.conftest import ALERTS, CHART, CI_VALUES, DASHBOARD, ROOT, TOOLS, run, tool

VALUE_SETS = [None, *CI_VALUES]
IDS = ["default", *(p.stem for p in CI_VALUES)]

CRD_CHECK = """
import json, sys
from cloudcoil.models.prometheus_operator import v1
doc = json.load(sys.stdin)
model = getattr(v1, doc["kind"]).model_validate(doc)
back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
if back != doc:
    sys.exit("fields the %s schema does not know: %s" % (doc["kind"], json.dumps(doc)))
"""


def render(
    values: Path | None, *extra: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    cmd = [tool("helm"), "template", "rel", str(CHART), "--namespace", "dp"]
    if values is not None:
        cmd += ["-f", str(values)]
    return run(*cmd, *extra, check=check)


@functools.cache
def _rendered(values: Path | None) -> str:
    return render(values).stdout


def docs(values: Path | None) -> list[dict]:
    """The rendered manifests (fresh objects: tests may change them)."""
    return [d for d in yaml.safe_load_all(_rendered(values)) if d]


def by_kind(manifests: list[dict], kind: str) -> list[dict]:
    return [d for d in manifests if d["kind"] == kind]


def test_ci_values_cover_the_issue_cases() -> None:
    assert {p.stem for p in CI_VALUES} >= {
        "local-mode-values",
        "monitoring-values",
        "existing-secret-values",
        "sasl-values",
    }


@pytest.mark.parametrize("values", VALUE_SETS, ids=IDS)
def test_helm_lint_strict(values: Path | None) -> None:
    cmd = [tool("helm"), "lint", "--strict", str(CHART)]
    out = run(*cmd, *(["-f", str(values)] if values else [])).stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in out
    assert "[WARNING]" not in out and "[ERROR]" not in out


@pytest.mark.parametrize("values", VALUE_SETS, ids=IDS)
def test_rendered_manifests_pass_kubernetes_validate_strict(
    values: Path | None, tmp_path: Path
) -> None:
    manifests = docs(values)
    core = [d for d in manifests if not d["apiVersion"].startswith("monitoring.coreos.com/")]
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(core))
    out = run(tool("kubernetes-validate"), "--strict", str(rendered))
    assert out.stdout.count("passed") == len(core), out.stdout
    kinds = {d["kind"] for d in core}
    assert {"StatefulSet", "Service", "PodDisruptionBudget"} <= kinds


@pytest.mark.parametrize("values", VALUE_SETS, ids=IDS)
def test_prometheus_operator_objects_match_their_crds(values: Path | None, tmp_path: Path) -> None:
    manifests = docs(values)
    custom = [d for d in manifests if d["apiVersion"].startswith("monitoring.coreos.com/")]
    env = dict(os.environ, PYTHONPATH=str(TOOLS / "python"))
    if not (TOOLS / "python" / "cloudcoil").is_dir():
        pytest.fail("prometheus-operator CRD models missing: run scripts/install-tools.sh")
    for doc in custom:
        run(sys.executable, "-c", CRD_CHECK, input=json.dumps(doc), env=env)
        if doc["kind"] == "PrometheusRule":
            rules = tmp_path / "rules.yaml"
            rules.write_text(yaml.safe_dump(doc["spec"]))
            assert "SUCCESS" in run(tool("promtool"), "check", "rules", str(rules)).stdout


def test_crd_check_rejects_an_unknown_field() -> None:
    manifests = docs(CHART / "ci" / "monitoring-values.yaml")
    monitor = by_kind(manifests, "ServiceMonitor")[0]
    monitor["spec"]["endpoints"][0]["scrapeIntervall"] = "5s"
    env = dict(os.environ, PYTHONPATH=str(TOOLS / "python"))
    proc = run(sys.executable, "-c", CRD_CHECK, input=json.dumps(monitor), env=env, check=False)
    assert proc.returncode != 0


def test_monitoring_values_render_servicemonitor_and_prometheusrule() -> None:
    manifests = docs(CHART / "ci" / "monitoring-values.yaml")
    (monitor,) = by_kind(manifests, "ServiceMonitor")
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] == "http-metrics" and endpoint["interval"] == "15s"
    assert endpoint["relabelings"][0] == {
        "action": "replace",
        "targetLabel": "job",
        "replacement": "dpstream",
    }
    (rule,) = by_kind(manifests, "PrometheusRule")
    canonical = yaml.safe_load(ALERTS.read_text())["groups"]
    assert rule["spec"]["groups"][: len(canonical)] == canonical  # the one source, verbatim
    assert rule["spec"]["groups"][-1]["rules"][0]["alert"] == "DpstreamConsumerLagPage"
    metrics_svc = [
        s for s in by_kind(manifests, "Service") if s["metadata"]["name"].endswith("-metrics")
    ]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items()
        <= metrics_svc[0]["metadata"]["labels"].items()
    )
    sts = by_kind(manifests, "StatefulSet")[0]
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenScaled": "Delete",
        "whenDeleted": "Retain",
    }
    assert "startupProbe" in sts["spec"]["template"]["spec"]["containers"][0]


def test_default_values_statefulset_shape() -> None:
    manifests = docs(None)
    (sts,) = by_kind(manifests, "StatefulSet")
    pod = sts["spec"]["template"]["spec"]
    (worker,) = pod["containers"]
    env = {e["name"]: e for e in worker["env"]}
    # Each replica its own RocksDB volume, mounted where DPSTREAM_STATE_DIR points.
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    state_mount = next(m for m in worker["volumeMounts"] if m["name"] == claim["metadata"]["name"])
    assert env["DPSTREAM_STATE_DIR"]["value"] == state_mount["mountPath"] == "/var/lib/dpstream"
    # Headless service governs the set.
    headless = next(
        s for s in by_kind(manifests, "Service") if s["spec"].get("clusterIP") == "None"
    )
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]
    # Non-root, read-only root filesystem, no privilege escalation, nothing added.
    sc = worker["securityContext"]
    assert sc["runAsNonRoot"] and sc["runAsUser"] == 10001 and sc["readOnlyRootFilesystem"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert any(m["mountPath"] == "/tmp" for m in worker["volumeMounts"])
    # Probes on the worker's agreed endpoints.
    assert worker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert worker["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert worker["ports"][0]["containerPort"] == int(env["DPSTREAM_METRICS_PORT"]["value"]) == 9464
    # The noise key comes as a mounted file, never as a plain env value.
    assert "DPSTREAM_NOISE_KEY" not in env
    assert env["DPSTREAM_NOISE_KEY_FILE"]["value"] == "/etc/dpstream/secrets/noise-key"
    assert pod["initContainers"][0]["args"] == ["topics", "create"]
    assert worker["resources"]["requests"] and worker["resources"]["limits"]
    (pdb,) = by_kind(manifests, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]


def test_generated_noise_key_is_one_the_worker_accepts() -> None:
    secret = next(s for s in by_kind(docs(None), "Secret") if "noise-key" in s["data"])
    key = base64.b64decode(secret["data"]["noise-key"]).decode()
    assert len(parse_noise_key(key).reveal()) == 32
    assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_existing_secret_values_use_the_named_objects() -> None:
    manifests = docs(CHART / "ci" / "existing-secret-values.yaml")
    assert not by_kind(manifests, "Secret") and not by_kind(manifests, "ServiceAccount")
    assert [c["metadata"]["name"] for c in by_kind(manifests, "ConfigMap")] == [
        "rel-dpstream-dashboard"
    ]
    pod = by_kind(manifests, "StatefulSet")[0]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["noise-key"]["secret"]["secretName"] == "dpstream-noise-key"
    assert volumes["noise-key"]["secret"]["items"] == [{"key": "key", "path": "noise-key"}]
    assert volumes["config"]["configMap"]["name"] == "dpstream-streams"
    assert pod["serviceAccountName"] == "dpstream-runner"
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]


def test_sasl_values_wire_credentials_from_secrets() -> None:
    manifests = docs(CHART / "ci" / "sasl-values.yaml")
    pod = by_kind(manifests, "StatefulSet")[0]["spec"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["DPSTREAM_KAFKA_SECURITY_PROTOCOL"]["value"] == "SASL_SSL"
    assert env["DPSTREAM_KAFKA_SASL_MECHANISM"]["value"] == "SCRAM-SHA-512"
    assert env["DPSTREAM_KAFKA_SASL_USERNAME"]["value"] == "dpstream"
    assert env["DPSTREAM_KAFKA_SASL_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "kafka-user-dpstream",
        "key": "password",
    }
    assert env["DPSTREAM_KAFKA_SSL_CAFILE"]["value"] == "/etc/dpstream/tls/ca.crt"
    ca = next(
        s for s in by_kind(manifests, "Secret") if s["metadata"]["name"].endswith("-kafka-ca")
    )
    assert base64.b64decode(ca["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")
    init_env = {e["name"] for e in pod["initContainers"][0]["env"]}
    assert {"DPSTREAM_KAFKA_SASL_PASSWORD", "DPSTREAM_KAFKA_SSL_CAFILE"} <= init_env


def test_sasl_without_credentials_fails_with_a_message() -> None:
    proc = render(None, "--set", "kafka.securityProtocol=SASL_PLAINTEXT", check=False)
    assert proc.returncode != 0 and "kafka.sasl.username is required" in proc.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("replicaCount: two\n", "/replicaCount"),
        ('persistence:\n  enabled: "yes"\n', "/persistence/enabled"),
        ("metrics:\n  port: 70000\n", "/metrics/port"),
        ("kafka:\n  securityProtocol: TLS\n", "/kafka/securityProtocol"),
        ("replicaCnt: 2\n", "additional properties 'replicaCnt' not allowed"),
        (
            "metrics:\n  serviceMonitor:\n    enable: true\n",
            "additional properties 'enable' not allowed",
        ),
    ],
    ids=[
        "wrong-type-int",
        "wrong-type-bool",
        "out-of-range",
        "bad-enum",
        "unknown-key",
        "unknown-nested-key",
    ],
)
def test_schema_rejects_bad_values(values: str, message: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(values)
    for cmd in ("template", "lint"):
        args = [
            tool("helm"),
            cmd,
            *(["rel"] if cmd == "template" else []),
            str(CHART),
            "-f",
            str(bad),
        ]
        proc = run(*args, check=False)
        assert proc.returncode != 0, f"helm {cmd} accepted {values!r}"
        assert message in proc.stdout + proc.stderr


def test_dashboard_configmap_carries_the_canonical_dashboard() -> None:
    manifests = docs(None)
    cm = next(
        c for c in by_kind(manifests, "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")
    )
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["dpstream.json"]) == json.loads(DASHBOARD.read_text())


def _params_in_values() -> list[str]:
    return re.findall(r"^\s*## @param (\S+) ", (CHART / "values.yaml").read_text(), flags=re.M)


def _leaf_keys(node: object, documented: set[str], prefix: str = "") -> list[str]:
    """Keys to document: scalars, lists, empty maps, and maps documented as a whole."""
    if isinstance(node, dict) and node and prefix not in documented:
        keys: list[str] = []
        for k, v in node.items():
            keys += _leaf_keys(v, documented, f"{prefix}.{k}" if prefix else k)
        return keys
    return [prefix]


def test_every_value_is_documented_in_values_yaml_and_the_readme() -> None:
    params = _params_in_values()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    documented = set(params)
    leaves = set(_leaf_keys(values, documented))
    assert leaves - documented == set(), "values without an @param line"
    assert documented - leaves == set(), "@param lines without a value"
    readme = (CHART / "README.md").read_text()
    missing = [p for p in params if f"`{p}`" not in readme]
    assert missing == [], "parameters missing from charts/dpstream/README.md"


def test_schema_knows_every_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())

    def walk(node: dict, sch: dict, path: str) -> None:
        for key, value in node.items():
            props = sch.get("properties", {})
            assert key in props, f"{path}{key} has no schema"
            if isinstance(value, dict) and props[key].get("additionalProperties") is False:
                walk(value, props[key], f"{path}{key}.")

    walk(values, schema, "")


def _streams_docs() -> list[tuple[str, dict]]:
    out = [("chart-default", yaml.safe_load((CHART / "values.yaml").read_text())["streamsConfig"])]
    out.append(
        ("compose", yaml.safe_load((ROOT / "deploy" / "compose" / "streams.yaml").read_text()))
    )
    for path in CI_VALUES:
        doc = yaml.safe_load(path.read_text()) or {}
        if "streamsConfig" in doc:
            out.append((path.stem, doc["streamsConfig"]))
    return out


@pytest.mark.parametrize(("name", "doc"), _streams_docs(), ids=[n for n, _ in _streams_docs()])
def test_shipped_streams_files_load_with_the_worker_config(
    name: str, doc: dict, tmp_path: Path
) -> None:
    from app.stream.config import load_streams

    path = tmp_path / "streams.yaml"
    path.write_text(yaml.safe_dump(doc))
    streams = load_streams(path, env={})
    assert [s.id for s in streams] == [s["id"] for s in doc["streams"]]
    assert [s.mode for s in streams] == [s.get("mode", "central") for s in doc["streams"]]


# --- secrets in the pod template (issue 9, item 9) ---------------------------------------------

PASSWORD = "hunter2"  # noqa: S105 - a dictionary word: its hash in a manifest would give it away
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _pod_annotations(*extra: str) -> dict[str, str]:
    manifests = [d for d in yaml.safe_load_all(render(None, *extra).stdout) if d]
    sts = by_kind(manifests, "StatefulSet")[0]
    return dict(sts["spec"]["template"]["metadata"].get("annotations") or {})


SASL = (
    "--set",
    "kafka.securityProtocol=SASL_SSL",
    "--set",
    "kafka.sasl.username=dpstream",
    "--set",
    f"kafka.sasl.password={PASSWORD}",
    "--set-string",
    f"kafka.tls.caCert={CA}",
)
KEY_A, KEY_B = "0a" * 32, "0b" * 32


def _unsalted_hashes() -> set[str]:
    """sha256 of everything the chart could hash that an attacker can enumerate without the
    noise key: the password alone, base64'd, and joined with the public connection settings."""
    import hashlib

    brokers, protocol = "kafka:9092", "SASL_SSL"
    b64 = base64.b64encode(PASSWORD.encode()).decode()
    plain = [PASSWORD, b64, CA, f"{brokers}|{protocol}|{PASSWORD}|{CA}"]
    plain += [f"{brokers}|{protocol}|{PASSWORD}|", f"{PASSWORD}|{CA}", f"{PASSWORD}\n"]
    return {hashlib.sha256(p.encode()).hexdigest() for p in plain}


def test_pod_template_carries_no_unsalted_hash_of_a_secret() -> None:
    key_values = ((), ("--set", f"noiseKey.value={KEY_A}"), ("--set", "noiseKey.existingSecret=nk"))
    for extra in key_values:
        annotations = _pod_annotations(*SASL, *extra)
        assert "checksum/kafka" not in annotations
        assert not set(annotations.values()) & _unsalted_hashes(), annotations
        for value in annotations.values():
            assert PASSWORD not in value and KEY_A not in value


def test_secret_checksum_rolls_the_pods_on_every_secret_change() -> None:
    base = _pod_annotations(*SASL, "--set", f"noiseKey.value={KEY_A}")["checksum/secret"]
    assert _pod_annotations(*SASL, "--set", f"noiseKey.value={KEY_A}")["checksum/secret"] == base
    changed_key = _pod_annotations(*SASL, "--set", f"noiseKey.value={KEY_B}")
    changed_pw = _pod_annotations(
        *SASL, "--set", f"noiseKey.value={KEY_A}", "--set", "kafka.sasl.password=other"
    )
    assert changed_key["checksum/secret"] != base != changed_pw["checksum/secret"]


def test_existing_noise_key_secret_rolls_by_an_explicit_revision() -> None:
    plain = _pod_annotations("--set", "noiseKey.existingSecret=nk")
    assert not any(k.startswith("checksum/secret") for k in plain)
    assert "dpstream.io/secrets-revision" not in plain
    rolled = _pod_annotations(
        "--set", "noiseKey.existingSecret=nk", "--set-string", "secretsRevision=2026-11-23"
    )
    assert rolled["dpstream.io/secrets-revision"] == "2026-11-23"
    readme = (CHART / "README.md").read_text()
    assert "secretsRevision" in readme and "rollout restart statefulset" in readme


# --- exact data counts on /metrics: an explicit opt-in, off by default (issue 9, item 1) ----------


def _worker_env(*extra: str) -> dict[str, dict]:
    manifests = [d for d in yaml.safe_load_all(render(None, *extra).stdout) if d]
    pod = by_kind(manifests, "StatefulSet")[0]["spec"]["template"]["spec"]
    return {e["name"]: e for e in pod["containers"][0]["env"]}


def test_data_counts_are_off_by_default_and_opt_in_is_wired() -> None:
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    assert defaults["metrics"]["exposeDataCounts"] is False
    assert _worker_env()["DPSTREAM_EXPOSE_DATA_COUNTS"]["value"] == "false"
    for path in CI_VALUES:
        assert _rendered_env(path)["DPSTREAM_EXPOSE_DATA_COUNTS"]["value"] == "false", path.stem
    on = _worker_env("--set", "metrics.exposeDataCounts=true")
    assert on["DPSTREAM_EXPOSE_DATA_COUNTS"]["value"] == "true"
    values_text = (CHART / "values.yaml").read_text()
    assert "WARNING" in values_text.split("exposeDataCounts: false")[0].rsplit("@param", 1)[1]


def _rendered_env(values: Path) -> dict[str, dict]:
    pod = by_kind(docs(values), "StatefulSet")[0]["spec"]["template"]["spec"]
    return {e["name"]: e for e in pod["containers"][0]["env"]}


def test_the_deployment_identity_is_unique_by_default_and_set_by_the_value() -> None:
    """Issue 33 section 2: two releases sharing a noise key never share a deployment identity
    by accident (the worker refuses a key without one)."""
    from app.stream.config.environment import deployment_id

    env = _rendered_env(None)  # type: ignore[arg-type]
    assert env["DPSTREAM_DEPLOYMENT"]["value"] == "rel.dp"
    out = render(None, "--set", "noiseKey.deploymentId=prod-eu.1").stdout
    sts = by_kind([d for d in yaml.safe_load_all(out) if d], "StatefulSet")[0]
    (worker,) = sts["spec"]["template"]["spec"]["containers"]
    value = {e["name"]: e.get("value") for e in worker["env"]}["DPSTREAM_DEPLOYMENT"]
    assert deployment_id({"DPSTREAM_DEPLOYMENT": value}, keyed=True) == "prod-eu.1"
    bad = render(None, "--set", "noiseKey.deploymentId=no spaces", check=False)
    assert bad.returncode != 0 and "deploymentId" in bad.stderr


def _notes(*extra: str) -> str:
    """NOTES.txt as `helm install` prints it (client-side dry run: no cluster needed)."""
    cmd = [tool("helm"), "install", "rel", str(CHART), "--dry-run=client", "--namespace", "dp"]
    out = run(*cmd, *extra).stdout
    return out[out.index("NOTES:") :]


def test_notes_list_every_topic_with_its_access_rule() -> None:
    from app.stream.topics import load_topics

    notes = _notes("--set", "topics.prefix=prod.")
    topics = load_topics("prod.")
    for spec in topics.specs:
        line = next((x for x in notes.splitlines() if f" {topics.name(spec.role)} " in x), None)
        assert line is not None, f"{topics.name(spec.role)} missing from NOTES.txt"
    sensitive = ["events", "dead-letter", "partials", "ledger-changelog", "slots-changelog"]
    for role in sensitive:
        line = next(x for x in notes.splitlines() if f" {topics.name(role)} " in x)
        assert "as events" in line or role == "events", line
    assert "docs/security.md" in notes and "DPSTREAM_EXPOSE_DATA_COUNTS" not in notes
    opted_in = _notes("--set", "metrics.exposeDataCounts=true")
    assert "WARNING: metrics.exposeDataCounts is true" in opted_in
    readme = (CHART / "README.md").read_text()
    for spec in topics.specs:
        assert f"`{spec.name}`" in readme, f"{spec.name} missing from the chart README"


def test_network_policy_admits_only_the_metrics_scrape() -> None:
    assert not by_kind(docs(None), "NetworkPolicy")
    manifests = docs(CHART / "ci" / "monitoring-values.yaml")
    (policy,) = by_kind(manifests, "NetworkPolicy")
    sts = by_kind(manifests, "StatefulSet")[0]
    assert policy["spec"]["podSelector"]["matchLabels"] == sts["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9464, "protocol": "TCP"}]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    default_peer = [
        d
        for d in yaml.safe_load_all(render(None, "--set", "networkPolicy.enabled=true").stdout)
        if d
    ]
    (policy,) = by_kind(default_peer, "NetworkPolicy")
    assert policy["spec"]["ingress"][0]["from"] == [{"podSelector": {}}]  # never "from anywhere"
