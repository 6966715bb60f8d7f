"""Topic specs as data (``app.stream.topics``): loading, the prefix, every malformed spec.

``create_topics`` needs a broker; ``tests/integration`` runs it (every worker test creates its
topics through it).
"""

from __future__ import annotations

import shutil

import pytest
import yaml

from app.stream.errors import TopicSpecError
from app.stream.topics import REQUIRED_ROLES, TOPICS_DIR, load_topics


@pytest.fixture
def specs(tmp_path):
    """A copy of ``topics/`` to break one file at a time."""
    directory = tmp_path / "topics"
    shutil.copytree(TOPICS_DIR, directory)
    return directory


def edit(directory, role, **changes):
    path = directory / f"{role}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc.update(changes)
    path.write_text(yaml.safe_dump(doc))


def test_every_role_has_a_spec_and_a_prefixed_name():
    t = load_topics(prefix="p.")
    roles = {s.role for s in t.specs}
    assert set(REQUIRED_ROLES) <= roles
    assert {"collection-requests", "reports"} <= roles
    names = {
        t.events,
        t.preferences,
        t.releases,
        t.audit,
        t.dead_letter,
        t.partials,
        t.collection_requests,
        t.reports,
    }
    assert len(names) == 8 and all(n.startswith("p.") for n in names)
    assert t.name("ledger-changelog") == "p." + t.spec("ledger-changelog").name


def test_events_and_preferences_are_co_partitioned():
    """The collect stage finds a user's level in the partition holding the user's events."""
    t = load_topics()
    assert t.spec("events").partitions == t.spec("preferences").partitions


def test_internal_topics_are_marked():
    t = load_topics()
    internal = {s.role for s in t.specs if s.internal}
    assert {"partials", "ledger-changelog", "slots-changelog"} <= internal
    assert "releases" not in internal and "events" not in internal


def test_the_directory_comes_from_the_environment(specs, monkeypatch):
    edit(specs, "events", partitions=7)
    monkeypatch.setenv("DPSTREAM_TOPICS_DIR", str(specs))
    assert load_topics().spec("events").partitions == 7
    monkeypatch.delenv("DPSTREAM_TOPICS_DIR")
    assert load_topics().spec("events").partitions != 7


def test_config_values_are_text(specs):
    edit(specs, "audit", config={"retention.ms": 1000, "cleanup.policy": "delete"})
    assert load_topics(directory=specs).spec("audit").config["retention.ms"] == "1000"


def test_a_missing_role_is_named(specs):
    (specs / "partials.yaml").unlink()
    with pytest.raises(TopicSpecError, match=r"missing topic specs for \['partials'\]"):
        load_topics(directory=specs)


def test_an_unknown_role_is_named():
    with pytest.raises(TopicSpecError, match="no topic spec for role 'nope'"):
        load_topics().spec("nope")


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"name": ""}, "`name` must be a non-empty string"),
        ({"name": 3}, "`name` must be a non-empty string"),
        ({"partitions": 0}, "`partitions` must be an int >= 1, got 0"),
        ({"partitions": True}, "`partitions` must be an int >= 1, got True"),
        ({"partitions": "4"}, "`partitions` must be an int >= 1"),
        ({"replication_factor": 0}, "`replication_factor` must be an int >= 1"),
        ({"config": ["a"]}, "needs a `config` mapping and `value.fields`"),
        ({"value": {"fields": {}}}, "needs a `config` mapping and `value.fields`"),
        ({"value": None}, "needs a `config` mapping and `value.fields`"),
    ],
)
def test_a_malformed_spec_names_the_file_and_field(specs, changes, match):
    edit(specs, "releases", **changes)
    with pytest.raises(TopicSpecError, match=match) as info:
        load_topics(directory=specs)
    assert "releases.yaml" in str(info.value)


@pytest.mark.parametrize(
    ("text", "match"), [("name: [", "not valid YAML"), ("- a\n- b\n", "expected a mapping")]
)
def test_a_file_that_is_not_a_mapping_is_refused(specs, text, match):
    (specs / "audit.yaml").write_text(text)
    with pytest.raises(TopicSpecError, match=match):
        load_topics(directory=specs)
