"""``verify`` against the situations of issues 31 §5 and 32 §2, each planted on hand-built topic
contents with its exact verdict: preferences the worker dead-letters, level histories compacted
away, malformed records, partials the release agent refuses, a configuration that is not the
deployment's, and nothing to account for."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from app.stream.collect.partitioning import partition_for
from app.stream.internal import Partial
from app.stream.records import pack
from app.verify import judge
from app.verify.fit import CannotJudge
from app.verify.read import Msg, RecordError
from app.verify.report import to_dict, to_text
from tests.verify.build import CENTRAL, PARTITIONS, Topics, stream_of
from tests.verify.test_plant import CHANGE_AT, SLOTS, USERS, central, local


def test_a_preference_outside_its_partition_changes_nothing(tmp_path: Path):
    """The worker dead-letters it (``wrong_partition``): no level change was owed."""
    t, _ = central(tmp_path)
    home = partition_for(b"u4", PARTITIONS)
    raw = msgpack.packb({"level": "loose"})
    t.snap.preferences.append(t._msg("preferences", (home + 1) % PARTITIONS, 1_010_000, b"u4", raw))
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    t.preference("u4", "loose", 1010.0)  # the same request in its own partition is owed
    t.read_preferences(1011.0)
    assert judge(t.stream, t.snap).counts == {"level_missing": 1}


def test_a_truncated_history_holds_the_tail_of_the_requests(tmp_path: Path):
    """u5 flipped 20 times in slot 99 (the worker keeps the last 16; its partials follow
    them, gap from slot 100): the record matches the last 16 requests, and a request after them
    that never came through is still found."""
    flips = [("u5", "loose" if i % 2 == 0 else "strict", 991.0 + i * 0.1) for i in range(20)]
    kept = [(at, level) for _, level, at in flips[4:]]
    histories = {"u1": [(CHANGE_AT, "loose")], "u5": kept}
    t, _ = central(tmp_path, histories=histories, asked=[("u1", "loose", CHANGE_AT), *flips])
    # the record as the worker writes it: truncated
    i = next(i for i, m in enumerate(t.snap.levels) if m.key == b"u5")
    rec = msgpack.unpackb(t.snap.levels[i].value)
    t.snap.levels[i] = t.snap.levels[i]._replace(value=pack({**rec, "truncated": True}))
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    assert verdict.not_released["level_change"] == 5 + 5  # u1's gap and u5's (100..104)
    t.preference("u5", "loose", 1012.0)  # after the kept tail, never applied
    t.read_preferences(1013.0)
    assert judge(t.stream, t.snap).counts == {"level_missing": 1}


def test_a_slot_is_judged_with_the_record_in_force_when_it_closed(tmp_path: Path):
    """u1's first record (loose from 1005) was in force for every slot; a later record that
    drops it (kept changes only from 1100 on, truncated) must not re-judge those slots."""
    t, _ = central(tmp_path)
    first = t.snap.levels[-1]
    t.snap.levels[-1] = first._replace(timestamp_ms=1_000_000)  # saved before slot 100 closed
    later = pack({"changes": [[1100.0, "strict"]], "truncated": True})
    t.snap.levels.append(t._msg("levels", first.partition, 1_200_000, b"u1", later))
    t.preference("u1", "strict", 1100.0)
    t.read_preferences(1100.0)
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    assert verdict.not_released["level_change"] == 5  # u1's gap 101..105, as before


def test_a_history_compacted_away_is_not_judged_and_said(tmp_path: Path):
    """The only record left of u1 is truncated and stamped after every slot closed, and the
    topic has a hole (compacted; here offset 0 is gone): what u1 was counted with is unknown,
    its values not judged."""
    t, _ = central(tmp_path)
    i = next(i for i, m in enumerate(t.snap.levels) if m.key == b"u1")
    rec = t.snap.levels[i]
    t.snap.levels[i] = rec._replace(
        offset=rec.offset + 100,  # the offsets below compacted away
        timestamp_ms=5_000_000,
        value=pack({"changes": [[CHANGE_AT, "loose"]], "truncated": True}),
    )
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    assert verdict.unjudged == len(SLOTS)  # u1's value in every slot
    assert "not judged" in to_text(verdict) and to_dict(verdict)["values"]["not_judged"] == 10


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        (b"u1", b"\xc1garbage", "malformed record"),
        (b"u1", msgpack.packb({"truncated": False}), "no list of changes"),
        (b"u1", msgpack.packb({"changes": [[1.0]]}), "not a pair"),
        (b"u1", msgpack.packb({"changes": [["x", "loose"]]}), "not a finite number"),
        (b"u1", msgpack.packb({"changes": [[float("nan"), "loose"]]}), "not a finite number"),
        (b"u1", msgpack.packb({"changes": [[1.0, 3]]}), "neither a name nor null"),
        (b"u1", msgpack.packb([1, 2]), "not a map"),
        (b"\xff\xfe", msgpack.packb({"changes": []}), "malformed record"),
    ],
)
def test_a_malformed_levels_record_refuses_the_verdict(tmp_path: Path, key, value, why):
    t, _ = central(tmp_path)
    t.snap.levels.append(t._msg("levels", 2, 0, key, value))
    with pytest.raises(RecordError, match=why) as err:
        judge(t.stream, t.snap)
    assert "levels partition 2 offset" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("topic", ["releases", "audit"])
def test_a_malformed_release_agent_record_refuses_the_verdict(tmp_path: Path, topic):
    t, _ = central(tmp_path)
    msgs = getattr(t.snap, topic)
    msgs.insert(3, t._msg(topic, 0, 0, b"s", b"\x92\x01"))  # a list, not a map
    with pytest.raises(RecordError, match=f"{topic} partition 0 offset"):
        judge(t.stream, t.snap)


def test_partials_out_of_range_or_shape_are_refused_like_the_release_agent(tmp_path: Path):
    t, _ = central(tmp_path)
    m, d = len(t.stream.levels), t.stream.d
    for counts in ([float("nan")] * (m * d), [-1] * (m * d), [1] * (m * d + 1)):
        raw = Partial(t.stream.id, 104, 0, PARTITIONS, counts).encode()
        t.snap.partials.insert(0, Msg(0, 0, 1_051_500, b"s", raw))  # before the real one
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    assert verdict.refused == {"refused_malformed": 2, "refused_shape": 1}  # as the decoder does


def test_another_configuration_than_the_topics_were_written_with_is_refused(tmp_path: Path):
    t, _ = central(tmp_path)
    other = stream_of(tmp_path, CENTRAL.replace("name: loose", "name: relaxed"))
    with pytest.raises(CannotJudge, match="levels strict, loose .* has strict, relaxed"):
        judge(other, t.snap)
    fewer = stream_of(tmp_path, CENTRAL.replace("labels: [a, b, c]", "labels: [a, b]"))
    t.snap.audit = []  # the levels agree; the releases have 3 bins
    with pytest.raises(CannotJudge, match="releases of 3 labels"):
        judge(fewer, t.snap)


def test_nothing_to_account_for_is_refused(tmp_path: Path):
    stream = stream_of(tmp_path, CENTRAL)
    t = Topics(stream)
    for slot in SLOTS:  # releases without a value: a deployment whose events verify cannot read
        t.release(slot, [0.0, 0.0, 0.0], at=slot * 10 + 12.0)
    with pytest.raises(CannotJudge, match="nothing to judge"):
        judge(stream, t.snap)
    t.event(USERS[0], 1001.0, 0)  # one value, not released yet: judged
    verdict = judge(stream, t.snap)
    assert verdict.ok and verdict.not_released == {"unclosed": 1}


def test_a_preference_stamped_past_the_horizon_is_not_owed(tmp_path: Path):
    """The worker refuses a preference stamped further ahead than its streams' horizon when it
    reads it (``bad_time``): read at 1011 (the offset marker's time), stamped 1011 + 61."""
    t, _ = central(tmp_path)
    t.preference("u4", "loose", 1011.0 + 61.0)
    t.read_preferences(1011.0)
    assert judge(t.stream, t.snap).ok
    t.preference("u6", "loose", 1011.0 + 59.0)  # within the horizon: owed
    t.read_preferences(1011.0)
    verdict = judge(t.stream, t.snap)
    assert verdict.counts == {"level_missing": 1} and verdict.violations[0].users == ("u6",)


def test_a_user_record_outside_its_partition_refuses_the_verdict(tmp_path: Path):
    """The worker refuses it (``bad_levels``): verify does not judge around it either."""
    t, _ = central(tmp_path)
    home = partition_for(b"u3", PARTITIONS)
    raw = pack({"changes": [[0.0, "loose"]], "truncated": False})
    t.snap.levels.append(t._msg("levels", (home + 1) % PARTITIONS, 0, b"u3", raw))
    with pytest.raises(RecordError, match="outside its key's partition"):
        judge(t.stream, t.snap)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        (b"\x00offset:x", pack({"offset": 3}), "another partition"),
        (b"\x00offset:1", pack({"offset": 3}), "another partition"),  # written to partition 0
        (b"\x00offset:0", pack({"offset": -1}), "non-negative"),
        (b"\x00offset:0", pack({"at": 3}), "malformed record"),
        (b"\x00other", pack({"offset": 3}), "unknown marker"),
    ],
)
def test_a_malformed_marker_refuses_the_verdict(tmp_path: Path, key, value, why):
    t, _ = central(tmp_path)
    t.snap.levels.append(t._msg("levels", 0, 0, key, value))
    with pytest.raises(RecordError, match=why) as err:
        judge(t.stream, t.snap)
    assert "levels partition 0 offset" in str(err.value)


def test_a_local_stream_without_an_answer_is_refused(tmp_path: Path):
    t = local(tmp_path, {})
    with pytest.raises(CannotJudge, match="no device answer of the stream"):
        judge(t.stream, t.snap)
    t.report(7, 1, "publication", [1])
    assert judge(t.stream, t.snap).released == 1
