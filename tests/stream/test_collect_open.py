"""The collect stage of an open-domain stream (issue 36 section 1): the contribution bound.

Held on random slots of a few users and keys:

- the partials equal an oracle written here from ``docs/open-domain.md`` (per user, the
  ``max_keys`` distinct keys of smallest ``mix(key_hash(key) + mix(user ^ salt))``), whatever
  the arrival order and the batching: so at most ``max_keys`` per user and slot, and the same
  keys after a replay;
- adding another user's events changes no other user's kept keys: the counts move by that
  user's kept keys only (at most ``max_keys``, all up);
- the keys kept depend on the salt (the deployment's noise key), and the fast path is taken.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import metrics
from app.dp.open.bounding import key_hash
from app.dp.open.salt import scores, slot_salt, user_words
from app.stream.collect.events import Collector, Record
from app.stream.config import load_streams
from app.stream.errors import ConfigError
from app.stream.internal import OpenPartial, decode

YAML = """
streams:
  - id: o
    domain: open
    max_keys: {max_keys}
    slot_s: 10
    grace_s: 1
    levels:
      - {{name: strict, w: 4, eps: 1.0, delta: 1.0e-4, population: 100000}}
      - {{name: loose, w: 2, eps: 2.0, delta: 1.0e-4, population: 100000}}
"""
KEY = b"n" * 32
DEPLOYMENT = "test"
NOW = 1_000.0
SLOTS = (95, 97)  # events at NOW - 50 and NOW - 30


def collector(tmp_path_factory, max_keys: int, key: bytes = KEY) -> Collector:
    return collector_at(str(tmp_path_factory.mktemp("open")), max_keys, key)


def collector_at(
    where: str, max_keys: int, key: bytes = KEY, events: tuple[tuple[str, str, float], ...] = ()
) -> Collector:
    """A collector of the open stream, its config in ``where``, fed ``events`` in one batch."""
    path = Path(where) / "s.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(YAML.format(max_keys=max_keys))
    c = Collector(load_streams(path, env={}), 1, key, DEPLOYMENT)
    c.assign(0)
    c.partitions[0].caught_up = True
    if events:
        feed(c, list(events), [])
    return c


def feed(c: Collector, events: list[tuple[str, str, float]], cuts: list[int]) -> None:
    """``events`` (user, key, ts) as records, in batches cut at ``cuts``."""
    records = [
        Record(i, u.encode(), msgpack.packb({"stream": "o", "user": u, "ts": ts, "value": k}))
        for i, (u, k, ts) in enumerate(events)
    ]
    bounds = [0, *sorted(set(cuts)), len(records)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        if a < b:
            assert c.add_batch(0, records[a:b], NOW) == []


def close(c: Collector) -> dict[int, dict[str, list[int]]]:
    """Close every slot; per slot, each key's counts per group (through the wire codec)."""
    c.observe_fetch(0, NOW - 5, at_end=True, gap_s=100)
    c.observe_fetch(0, NOW, at_end=True, gap_s=100)
    partials, _ = c.flush()
    out: dict[int, dict[str, list[int]]] = {}
    for p in partials:
        p = decode(p.encode())
        assert isinstance(p, OpenPartial)
        groups = len(p.counts) // len(p.keys) if p.keys else 0
        for j, k in enumerate(p.keys):
            out.setdefault(p.slot, {})[k] = [p.counts[g * len(p.keys) + j] for g in range(groups)]
    return out


def oracle(events: list[tuple[str, str, float]], max_keys: int) -> dict[int, dict[str, list[int]]]:
    """Per slot, the counts of the keys each user keeps (default group: the first level)."""
    pairs: dict[int, set[tuple[str, str]]] = {}
    for u, k, ts in events:
        pairs.setdefault(int(ts // 10), set()).add((u, k))
    out: dict[int, dict[str, list[int]]] = {}
    for slot, held in pairs.items():
        salt = slot_salt(KEY, DEPLOYMENT, "o", slot)
        per_user: dict[str, list[tuple[int, str]]] = {}
        for u, k in sorted(held):
            s = scores(key_hash(np.array([k])), user_words([u]), salt)
            per_user.setdefault(u, []).append((int(s[0]), k))
        counts: Counter[str] = Counter()
        for kept in per_user.values():
            counts.update(k for _, k in sorted(kept)[:max_keys])
        out[slot] = {k: [n, 0] for k, n in counts.items()}
    return out


USERS = [f"user-{i}" for i in range(8)]
KEYS = ["home", "news", "a.com/x", "b.org", "clinic-42", "é", "z" * 40]
EVENTS = st.lists(
    st.tuples(
        st.sampled_from(USERS),
        st.sampled_from(KEYS),
        st.sampled_from([NOW - 50, NOW - 30, NOW - 29.5]),
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(events=EVENTS, max_keys=st.integers(1, 3), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_the_kept_keys_are_the_documented_ones_in_any_order_and_batching(
    tmp_path_factory, events, max_keys, seed, data
):
    shuffled = events[:]
    random.Random(seed).shuffle(shuffled)
    cuts = data.draw(st.lists(st.integers(0, len(events)), max_size=6))
    c = collector(tmp_path_factory, max_keys)
    feed(c, shuffled, cuts)
    got = close(c)
    want = oracle(events, max_keys)
    assert {s: v for s, v in got.items() if v} == want
    users = {s: len({u for u, _, ts in events if int(ts // 10) == s}) for s in want}
    for slot, keys in got.items():  # the bound itself, from the counts alone
        assert sum(n[0] for n in keys.values()) <= max_keys * users[slot]


@settings(max_examples=60, deadline=None)
@given(events=EVENTS, extra=EVENTS, max_keys=st.integers(1, 3))
def test_another_users_events_never_change_a_users_kept_keys(
    tmp_path_factory, events, extra, max_keys
):
    """D and D plus one more user's events (any keys, any number): every key's count moves
    up by at most 1, by at most max_keys keys in all, per slot."""
    mine = [(u, k, ts) for u, k, ts in events if u != "user-0"]
    theirs = [("user-0", k, ts) for _, k, ts in extra]
    a, b = collector(tmp_path_factory, max_keys), collector(tmp_path_factory, max_keys)
    feed(a, mine, [len(mine) // 2])
    feed(b, mine + theirs, [len(mine) // 3, len(mine)])
    without, with_ = close(a), close(b)
    for slot in set(without) | set(with_):
        before, after = without.get(slot, {}), with_.get(slot, {})
        moved = {k: after.get(k, [0, 0])[0] - before.get(k, [0, 0])[0] for k in {*before, *after}}
        assert all(0 <= m <= 1 for m in moved.values())
        assert sum(moved.values()) <= max_keys


def test_a_replay_keeps_the_same_keys_and_another_key_other_ones(tmp_path_factory):
    """One user with 200 keys, max_keys 3: a second collector (a replay, in the other order and
    other batches) keeps the same 3; a deployment with another noise key keeps other ones."""
    events = [("user-1", f"key-{i}", NOW - 50) for i in range(200)]
    first = collector(tmp_path_factory, 3)
    feed(first, events, [50, 120])
    replay = collector(tmp_path_factory, 3)
    feed(replay, events[::-1], [7])
    other = collector(tmp_path_factory, 3, key=b"m" * 32)
    feed(other, events, [])
    kept, again, elsewhere = (set(close(c)[SLOTS[0]]) for c in (first, replay, other))
    assert len(kept) == 3 and kept == again
    assert kept != elsewhere  # 3 of 200 twice alike: probability about 1e-6


REPLAY = """
import json, sys
from tests.stream.test_collect_open import collector_at, feed, close
c = collector_at(sys.argv[1], 2)
feed(c, [tuple(e) for e in json.loads(sys.argv[2])], [3])
print(json.dumps({str(s): v for s, v in close(c).items()}))
"""


def test_another_process_keeps_the_same_keys(tmp_path):
    """Digests of users and keys are keyed per process: another process (a replay on another
    worker) must still keep the same keys, from the salt and the documented hashes alone."""
    import json
    import subprocess
    import sys

    events = [(f"user-{u}", f"k-{u}-{j}", NOW - 50) for u in range(5) for j in range(20)]
    here = close(collector_at(str(tmp_path), 2, events=tuple(events)))
    out = subprocess.run(
        [sys.executable, "-c", REPLAY, str(tmp_path / "child"), json.dumps(events)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    there = {int(s): v for s, v in json.loads(out.stdout).items()}
    assert here == there and sum(n[0] for n in here[SLOTS[0]].values()) == 10


def test_the_partial_counts_users_per_level_group(tmp_path_factory):
    c = collector(tmp_path_factory, 1)
    c.set_preference("user-2", "loose", NOW - 500)
    feed(c, [("user-1", "home", NOW - 50), ("user-2", "home", NOW - 50)], [])
    assert close(c)[SLOTS[0]] == {"home": [1, 1]}  # groups in the levels' order


def test_the_fast_path_counts_outcomes_and_the_slot_signal(tmp_path_factory):
    c = collector(tmp_path_factory, 1)
    user = "user-3"
    raws = [msgpack.packb({"stream": "o", "user": user, "ts": NOW - 50, "value": k}) for k in "aab"]
    records = [Record(i, user.encode(), raw) for i, raw in enumerate(raws)]
    assert c._count_fast(0, records, c.check(0, records, NOW), NOW)
    assert c.outcomes == {("o", "accepted"): 1, ("o", "duplicate"): 1, ("o", "clipped"): 1}
    close(c)
    assert c.take_clipped_slots() == {("o", SLOTS[0])}
    assert c.take_clipped_slots() == set()


def test_the_clipped_signal_counts_a_slot_once_per_worker(tmp_path_factory):
    from app.stream.ops.late import LateSlots

    signal = LateSlots(counter=metrics.CLIPPED_SLOTS)
    before = metrics.CLIPPED_SLOTS.labels("o")._value.get()
    assert (signal.mark("o", 5), signal.mark("o", 5), signal.mark("o", 6)) == (True, False, True)
    assert metrics.CLIPPED_SLOTS.labels("o")._value.get() == before + 2


def test_a_slot_without_events_is_one_empty_partial(tmp_path_factory):
    c = collector(tmp_path_factory, 1)
    c.observe_fetch(0, NOW - 5, at_end=True, gap_s=100)
    c.observe_fetch(0, NOW, at_end=True, gap_s=100)
    partials, _ = c.flush()
    assert [(p.keys, p.counts, p.chunk, p.chunks) for p in partials] == [((), [], 0, 1)]


def test_an_open_stream_needs_the_noise_key(tmp_path_factory):
    path = tmp_path_factory.mktemp("open") / "s.yaml"
    path.write_text(YAML.format(max_keys=1))
    with pytest.raises(ConfigError, match="noise key"):
        Collector(load_streams(path, env={}), 1)
