"""The release agent refuses internal messages from the future or from unknown partitions
(issue 21 item 2), whatever their other fields; the stream beside them is untouched."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from app.stream.config import load_settings
from app.stream.internal import Partial, Tick
from app.stream.release.guard import SHOW_S, Guard
from app.stream.slots import SlotClock
from tests.stream.agent import agent, run, sized_topics

YAML = """
streams:
  - id: s
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    mechanism: {name: uniform}
    levels: [{name: only, w: 2, eps: 900}]
  - id: t
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    mechanism: {name: uniform}
    levels: [{name: only, w: 2, eps: 900}]
"""
CLOCK = SlotClock(slot_s=1.0, grace_s=0.5)


@settings(max_examples=300, deadline=None)
@given(
    now=st.floats(1e6, 2e9),
    ahead=st.floats(0, 1e7),
    partition=st.integers(-5, 50),
    partitions=st.integers(1, 8),
)
def test_a_tick_is_refused_iff_it_is_past_the_horizon_or_names_an_unknown_partition(
    now, ahead, partition, partitions
):
    msg = Tick("s", {partition: now + ahead}, partitions)
    reason = Guard().refusal(CLOCK, "central", msg, partitions, now)
    if not 0 <= partition < partitions:
        assert reason == "partition"
    elif now + ahead > CLOCK.horizon(now):
        assert reason == "future"
    else:
        assert reason is None


def test_a_message_naming_another_partition_count_is_refused():
    msg = Tick("s", {}, 99)
    assert Guard().refusal(CLOCK, "local", msg, 4, 100.0) == "partition"
    bad_time = Tick("s", {0: float("nan")}, 4)
    assert Guard().refusal(CLOCK, "central", bad_time, 4, 100.0) == "future"


def test_readiness_names_a_refusing_stream_for_a_while():
    g = Guard()
    g.refuse("s", "future", Tick("s", {}, 1), 100.0)
    said = "stream s: refused internal messages (future), see the log"
    assert g.reasons(100.0 + SHOW_S) == [said]
    assert g.reasons(100.0 + SHOW_S + 1) == []


def test_forged_ticks_and_partials_release_nothing_and_spare_the_other_stream(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    settings_ = load_settings(
        env={"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}, config=path
    )
    out: list[tuple[str, bytes, bytes]] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        out.append((topic, key, value))

    r = agent(settings_, {}, {}, produce, sized_topics(events=2))
    now = 100.6
    run(r, Tick("s", {0: now, 1: now}, 2).encode(), now)  # s starts: slot 99 released
    run(r, Tick("t", {0: now, 1: now}, 2).encode(), now)
    before = len(out)
    run(r, Tick("s", {0: now + 86_400, 1: now + 86_400}, 2).encode(), now + 0.1)
    run(r, Partial("s", 101, 99, 2, [5, 5]).encode(), now + 0.1)
    run(r, Partial("s", 101, 0, 4, [5, 5]).encode(), now + 0.1)
    assert len(out) == before, "nothing released from the forged messages"
    run(r, Tick("t", {0: now + 1, 1: now + 1}, 2).encode(), now + 1)  # t goes on
    released = [msgpack.unpackb(v) for topic, _, v in out[before:] if topic.endswith("releases")]
    assert [(x["stream"], x["slot"]) for x in released] == [("t", 100)]
