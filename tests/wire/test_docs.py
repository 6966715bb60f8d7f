"""``docs/wire.md`` documents every public record as ``topics/*.yaml`` states it, each codec
writes the fields the schema names, and the example consumer needs nothing of ``app``."""

from __future__ import annotations

import ast
import re
from dataclasses import fields
from pathlib import Path

import pytest

from app.dp.local.wire import CollectionRequest
from app.stream.topics import load_topics
from app.wire import audit, codec, dead_letters, events, preferences, releases, reports, requests

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "wire.md").read_text()
EXAMPLE = REPO / "docs" / "examples" / "consumer.py"

ASK = CollectionRequest("lpu", 3, "publication", 2, 4, None, ("grr",), (1.0,), (8,))
FULL = {
    "events": (events, events.encode(events.Event("s", "u", 1.0, 0, 2.0))),
    "preferences": (preferences, preferences.encode(preferences.Preference("open"))),
    "collection-requests": (
        requests,
        requests.encode(requests.RequestRecord("s", 1, 0.0, 1.0, 2.0, 3, ASK)),
    ),
    "reports": (reports, reports.encode(reports.Report("s", "m", 1, "publication", 2, 0, "o", ()))),
    "releases": (
        releases,
        releases.encode(
            releases.SlotRelease(
                *("s", 1, 0.0, 1.0, (1.0,), True, "m", {}, 1, 2, 2.0, False, {}),
                *(("k",), ("k",), "publish", 3, (), {}, {}, {}),
            )
        ),
    ),
    "audit": (
        audit,
        audit.encode(
            audit.AuditRecord(
                *("s", 1, "m", "d", "replace", 2, "geometric", "", "publish", True, 1.0, False),
                *(None, None, {}, {}, {}, {}, {}, {}, {}, 1, 1, {}, {}, {}, {}, {}, {}),
            )
        ),
    ),
    "dead-letter": (
        dead_letters,
        dead_letters.encode(dead_letters.DeadLetter("too_large", "", "t", 0, 0, b"x" * 5000)),
    ),
}
"""Per public topic, its codec and a record with every optional field set, encoded."""


def _section(topic: str) -> str:
    found = re.search(rf"^## `{re.escape(topic)}`\n(.*?)(?=^## |\Z)", DOC, re.M | re.S)
    assert found, f"docs/wire.md has no section for {topic}"
    return found.group(1)


def _cell(text: str) -> str:
    return text.replace("\\|", "|")


def _rows(topic: str) -> dict[str, tuple[str, str, str]]:
    out = {}
    for line in _section(topic).splitlines():
        m = re.match(r"^\| `([^`]+)` \| `(.+?)` \| (yes|no) \| (.*) \|$", line)
        if m:
            out[m.group(1)] = (_cell(m.group(2)), m.group(3), _cell(m.group(4)))
    return out


@pytest.mark.parametrize("topic", sorted(FULL))
def test_the_doc_table_is_the_topics_schema(topic: str) -> None:
    spec = load_topics("").spec(topic).fields
    want = {
        name: (str(f["type"]), "yes" if f.get("required") else "no", str(f.get("doc", "")))
        for name, f in spec.items()
    }
    assert _rows(topic) == want


@pytest.mark.parametrize("topic", sorted(FULL))
def test_each_codec_writes_the_schemas_fields(topic: str) -> None:
    module, raw = FULL[topic]
    spec = load_topics("").spec(topic).fields
    written = set(codec.read_map(raw, topic))
    required = {name for name, f in spec.items() if f.get("required")}
    assert required <= written <= set(spec), (sorted(written - set(spec)), sorted(required))
    assert f"Version: {module.VERSION}" in " ".join(_section(topic).split())


def test_each_record_type_names_only_schema_fields() -> None:
    kinds = {
        "events": events.Event,
        "preferences": preferences.Preference,
        "collection-requests": requests.RequestRecord,
        "reports": reports.Report,
        "releases": releases.SlotRelease,
        "audit": audit.AuditRecord,
        "dead-letter": dead_letters.DeadLetter,
    }
    topics = load_topics("")
    for topic, kind in kinds.items():
        names = {f.name for f in fields(kind)}
        assert names <= set(topics.spec(topic).fields), (topic, names)


def test_the_example_consumer_imports_no_part_of_the_service() -> None:
    tree = ast.parse(EXAMPLE.read_text())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    roots = {m.split(".")[0] for m in modules}
    assert "app" not in roots
    assert roots - {"__future__", "argparse", "json", "sys", "time", "uuid"} == {
        "confluent_kafka",
        "msgpack",
    }
