"""docs/security.md and the chart's documents say what issue 9 (secrets, exact counts on
/metrics) and issue 16 (access rules for every internal topic) ask, for every topic that
topics/*.yaml defines: a new topic without a documented sensitivity fails here."""

from __future__ import annotations

import re

import pytest

from app.stream.topics import load_topics
from tests.deploy.conftest import CHART, ROOT

SECURITY = ROOT / "docs" / "security.md"
PUBLIC = {"releases", "audit", "collection-requests"}


def _rows() -> dict[str, str]:
    """Topic name -> its row in docs/security.md's topic table."""
    rows = {}
    for line in SECURITY.read_text().splitlines():
        m = re.match(r"^\| `([a-z-]+)` \|", line)
        if m:
            rows[m.group(1)] = line
    return rows


@pytest.mark.parametrize("spec", load_topics("").specs, ids=lambda s: s.name)
def test_every_topic_has_a_documented_sensitivity(spec) -> None:  # type: ignore[no-untyped-def]
    row = _rows().get(spec.name)
    assert row is not None, f"{spec.name} missing from docs/security.md"
    if spec.role in PUBLIC:
        assert "**public**" in row
    else:
        assert "**public**" not in row
        assert "as `events`" in row or spec.role == "events", row


def test_internal_topics_with_exact_counts_are_called_out() -> None:
    text = SECURITY.read_text()
    rows = _rows()
    for role in ("partials", "slots-changelog"):
        name = load_topics("").spec(role).name
        assert "exact" in rows[name].lower(), name
    assert '"Internal" is not a sensitivity' in text


def test_security_doc_covers_keys_rotation_metrics_and_binding() -> None:
    text = SECURITY.read_text()
    for needle in (
        "### Rotating the noise key",
        "never recomputed",
        "deployment identity",
        "noise-key-init.py",
        "DPSTREAM_EXPOSE_DATA_COUNTS",
        "metrics.exposeDataCounts",
        "dpstream_events_total",
        "DPSTREAM_METRICS_BIND",
        "checksum/secret",
        "secretsRevision",
    ):
        assert needle in text, needle


def test_readmes_point_to_the_security_doc() -> None:
    assert "docs/security.md" in (ROOT / "README.md").read_text()
    assert "docs/security.md" in (CHART / "README.md").read_text()
    assert "docs/security.md" in (CHART / "templates" / "NOTES.txt").read_text()
    assert "docs/security.md" in (ROOT / "deploy" / "compose" / "README.md").read_text()
