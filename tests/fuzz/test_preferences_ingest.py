"""Issue 31 §6: the ingest's ``preferences`` side input, fed hostile records.

A preference record may carry any key (not UTF-8, another partition's user, none), any value
(:mod:`tests.fuzz.hostile`) and any Kafka timestamp: applying it never raises; a record outside its
key's partition is refused as ``wrong_partition``, one stamped past the horizon as ``bad_time``;
any other one sets a level (a value that is not
a level name means the default level) and leaves a history that packs for the ``levels`` topic.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.collect.ingest import IngestService
from app.stream.collect.partitioning import partition_for
from app.stream.collect.preferences import too_far
from app.stream.config import load_settings
from app.stream.records import REASONS, pack
from app.stream.topics import load_topics
from tests.fuzz.hostile import records

YAML = """
streams:
  - id: s
    labels: [a, b, c]
    slot_s: 10
    grace_s: 1
    levels: [{name: strict, w: 4, eps: 1.0}, {name: loose, w: 2, eps: 1.0}]
"""


@st.composite
def preferences(draw: st.DrawFn, partitions: int) -> SimpleNamespace:
    key = draw(st.one_of(st.sampled_from([b"u1", b"u2"]), st.binary(max_size=8), st.none()))
    home = partition_for(key, partitions) if key is not None else 0
    return SimpleNamespace(
        topic="preferences",
        partition=draw(st.one_of(st.just(home), st.integers(0, partitions - 1))),
        offset=draw(st.integers(0, 10)),
        key=key,
        value=draw(records({"level": st.sampled_from(["strict", "loose", "nope"])})),
        timestamp=draw(st.integers(-(2**63), 2**63 - 1)),
    )


PARTITIONS = load_topics().spec("events").partitions


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> tuple[IngestService, list[tuple[str, object]]]:
    """One service for every example (its levels carry over: any state is fair game)."""
    path = tmp_path_factory.mktemp("prefs") / "s.yaml"
    path.write_text(YAML)
    env = {
        "DPSTREAM_NOISE_KEY": "cd" * 16,
        "DPSTREAM_DEPLOYMENT": "fuzz",
        "DPSTREAM_BROKER": "127.0.0.1:1",
    }
    refused: list[tuple[str, object]] = []
    svc = IngestService(
        load_settings(env=env, config=path),
        load_topics(),
        group_id="g",
        policy=lambda exc, rec, log: refused.append((exc.reason, rec)),
    )
    for p in range(PARTITIONS):
        svc.collector.assign(p)
    return svc, refused


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(preferences(PARTITIONS), max_size=12))
def test_hostile_preferences_are_applied_or_refused_never_fatal(service, batch) -> None:
    svc, refused = service
    refused.clear()
    for rec in batch:
        svc._apply_side_input(rec)
    for reason, rec in refused:
        assert reason in {"wrong_partition", "bad_time"} and reason in REASONS
        assert rec.key is not None
        if reason == "wrong_partition":
            assert partition_for(rec.key, PARTITIONS) != rec.partition
        else:  # in its partition, but stamped past the horizon
            assert partition_for(rec.key, PARTITIONS) == rec.partition
            assert too_far(rec.timestamp / 1000, time.time(), svc.settings.streams)
    for user in svc._unsaved:  # what the levels topic would get packs
        history = svc.collector.preferences.history(user)
        assert history is not None and pack(history.to_dict())
