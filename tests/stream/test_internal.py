"""The internal wire: typed messages round-trip, anything else is an InternalError, and the
release agent refuses a malformed message without stopping (docs/design.md invariant 7)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import metrics
from app.stream.config import load_settings
from app.stream.internal import (
    InternalError,
    OpenRound,
    OpenSlot,
    Partial,
    PartitionTally,
    Tick,
    decode,
    decode_open_round,
    decode_open_slots,
    encode_open_round,
    encode_open_slots,
)
from tests.stream.agent import agent, run, sized_topics

MESSAGES = [
    Partial("s", 12, 1, 4, [1, 0, 2]),
    Partial("sum", 3, 0, 1, [0.25, 1.5]),
    Tick("s", {3: 120.0, 0: 119.5}, 4),
    Tick("loc", {}, 2),
    PartitionTally("loc", 3, "publication", 1, 2, [4, 5], [9], 31.5),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(msg):
    assert decode(msg.encode()) == msg


scalars = (
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats() | st.text(max_size=5)
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "stream",
                    "slot",
                    "partition",
                    "partitions",
                    "counts",
                    "progress",
                    "round",
                    "support",
                    "reports",
                    "now",
                ]
            )
            | st.integers(0, 5),
            inner,
            max_size=8,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(value=junk, kind=st.sampled_from(["partial", "tick", "tally", "other"]))
def test_anything_else_is_an_internal_error(value, kind):
    raw = msgpack.packb({**value, "kind": kind} if isinstance(value, dict) else value)
    try:
        msg = decode(raw)
    except InternalError:
        return
    assert decode(msg.encode()) == msg  # whatever decodes is a well-formed message


def test_the_slots_records_keep_the_bytes_of_earlier_releases():
    old = msgpack.packb({12: {"counts": [3, 1], "parts": [0, 2], "digests": {"0": 7}}})
    slots = decode_open_slots(old)
    assert slots == {12: OpenSlot([3, 1], (0, 2), {"0": 7})}
    assert encode_open_slots(slots) == old
    merged = slots[12].merge(1, [1, 1], 9)
    assert merged == OpenSlot([4, 2], (0, 2, 1), {"0": 7, "1": 9})
    cur = OpenRound(5, "publication", [1, 2], [3], 2, (1,))
    assert decode_open_round(encode_open_round(cur)) == cur
    assert decode_open_round(None) is None


def test_the_agent_refuses_a_malformed_message_and_goes_on(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("""
streams:
  - id: s
    labels: [a, b]
    slot_s: 1
    grace_s: 0.5
    mechanism: {name: uniform}
    levels: [{name: only, w: 2, eps: 900}]
""")
    settings_ = load_settings(
        env={"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}, config=path
    )
    sent: list[str] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        sent.append(topic)

    r = agent(settings_, {}, {}, produce, sized_topics())
    before = metrics.INTERNAL_REFUSED.labels("", "malformed")._value.get()
    for raw in (b"\xc1", msgpack.packb({"kind": "partial", "stream": "s"}), msgpack.packb([1])):
        run(r, raw, 100.6)
    assert metrics.INTERNAL_REFUSED.labels("", "malformed")._value.get() == before + 3
    run(r, Tick("s", {0: 100.6}, 1).encode(), 100.6)
    assert any(t.endswith("releases") for t in sent), "the next good message is served"
