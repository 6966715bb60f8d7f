"""An open stream's ledger entry and release record always fit one message (issue 36 review).

Before the cap, every public key stayed in the mechanism state and in the release kept in the
ledger entry: 20,000 selected keys made an entry no producer of 1,000,000-byte messages
takes. Now a release shows at most ``max_released_keys`` keys, and the release agent refuses to
start on a stream whose worst slot (:func:`app.stream.release.open.worst_sizes`) would not
fit. The level selects a key of 9 users all but surely (``eps = 20`` over one slot, ``tau = 2``;
``tests/stream/test_open_release.py``).
"""

from __future__ import annotations

import dataclasses

import pytest

from app.stream.config import load_settings
from app.stream.errors import ConfigError
from app.stream.internal import OpenPartial, Tick
from app.stream.release.open import (
    fits,
    message_bytes,
    most_released_keys,
    table_message_bytes,
    worst_sizes,
)
from app.stream.topics import MAX_MESSAGE_BYTES
from app.wire import releases
from tests.stream.agent import TEST_ENV, agent, run, sized_topics

CHARS = 24
CAP = 1000
"""The cap of the stream below: its worst slot fits (about 1,800 keys of 24 characters do)."""
YAML = """
streams:
  - id: u
    domain: open
    slot_s: 1
    grace_s: 0.5
    release_timeout_s: 1
    max_key_chars: {chars}
    {cap}
    mechanism: {{name: open_uniform}}
    levels: [{{name: only, w: 1, eps: 20.0, delta: 1.0e-3, population: 100000}}]
"""


def settings_of(tmp_path, cap=f"max_released_keys: {CAP}", chars=CHARS):
    config = tmp_path / "s.yaml"
    config.write_text(YAML.format(cap=cap, chars=chars))
    return load_settings(env=TEST_ENV, config=config)


def longest_key(i: int) -> str:
    """A distinct key of ``CHARS`` characters of 4 UTF-8 bytes each (the widest there is)."""
    return chr(0x10000 + i) + chr(0x10FFFF) * (CHARS - 1)


def test_a_slot_of_20000_longest_keys_releases_the_cap_and_its_entry_fits(tmp_path):
    ledger, slots, sent = {}, {}, []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        sent.append((topic, key, value))

    r = agent(settings_of(tmp_path), ledger, slots, produce, topics=sized_topics(events=1))
    run(r, Tick("u", {0: 10.6}, 1).encode(), 10.6)
    keys = [longest_key(i) for i in range(20_000)]
    chunks = 20
    for c in range(chunks):  # each key of 9 users: selected but for P < 1e-30 each
        part = keys[c * 1000 : (c + 1) * 1000]
        msg = OpenPartial("u", 10, 0, 1, tuple(part), [9] * len(part), c, chunks)
        run(r, msg.encode(), 10.7)
    run(r, Tick("u", {0: 11.6}, 1).encode(), 11.6)
    out = [(k, v) for t, k, v in sent if t == "releases"]
    rel = releases.decode(out[-1][1])
    assert rel.slot == 10 and len(rel.keys) == CAP and len(rel.new_keys) == CAP
    entry = ledger["u"]
    assert table_message_bytes("u", entry) <= MAX_MESSAGE_BYTES  # 1.8 MB before the cap
    assert message_bytes(*out[-1]) <= MAX_MESSAGE_BYTES
    # the next slot releases the same keys as public: the entry stays within the limit
    run(r, Tick("u", {0: 12.6}, 1).encode(), 12.6)
    nxt = releases.decode([v for t, _, v in sent if t == "releases"][-1])
    assert nxt.slot == 11 and nxt.keys == rel.keys and nxt.new_keys == ()
    assert table_message_bytes("u", ledger["u"]) <= MAX_MESSAGE_BYTES


def test_the_worst_slot_is_measured_at_the_widest_and_bounds_a_real_one(tmp_path):
    stream = settings_of(tmp_path).streams[0]
    record, entry = worst_sizes(stream, CAP, "test")
    assert record <= entry <= MAX_MESSAGE_BYTES
    wider = dataclasses.replace(stream, max_key_chars=2 * CHARS)
    assert worst_sizes(wider, CAP, "test")[1] > entry + CAP * CHARS * 4  # keys counted twice+
    most = most_released_keys(stream, 10**5, "test")
    assert fits(stream, most, "test") and not fits(stream, most + 1, "test")
    assert CAP < most < 4096


def test_the_agent_refuses_a_cap_whose_worst_slot_does_not_fit(tmp_path):
    settings = settings_of(tmp_path, cap="max_released_keys: 4096")

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        raise AssertionError("nothing is produced")

    with pytest.raises(ConfigError, match=r"stream u: .*4096.* \(at most \d+ fit\)") as err:
        agent(settings, {}, {}, produce)
    assert "\n" not in str(err.value)


def test_the_default_cap_fits_the_default_key_length(tmp_path):
    stream = settings_of(tmp_path, cap="", chars=256).streams[0]
    assert stream.max_released_keys == 128
    assert fits(stream, stream.max_released_keys, "a-long-deployment-name-" * 4)
