"""Property tests over long random streams of the open-domain mechanisms (issue 36).

* every level's eps and delta, summed over any window of ``w`` slots, stay within its own;
* a user never contributes more than ``max_keys`` keys per slot, each once, and removing a
  user moves the bounded counts by at most ``max_keys`` in L1 (the noise's sensitivity);
* a public key is released at every slot until it is retired, and retired only after
  ``retire_after`` released counts below the threshold in a row;
* the keys only the changed user holds pass the threshold with probability within the slot's
  delta at every level.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.open import Level, OpenPBA, OpenUniform
from app.dp.open.bounding import bound, kept_pairs, key_hash
from app.dp.open.checks import random_events, window_violations
from app.dp.open.threshold import rate, singleton_release

LEVEL = st.builds(
    Level,
    w=st.integers(1, 15),
    eps=st.sampled_from([0.5, 1.0, 2.0, 5.0, 10.0]),
    delta=st.sampled_from([1e-7, 1e-5, 1e-4, 1e-3]),
)
CONFIG = st.fixed_dictionaries(
    {
        "levels": st.lists(LEVEL, min_size=1, max_size=3),
        "max_keys": st.integers(1, 4),
        "sensitivity": st.sampled_from([1, 2]),
        "retire_after": st.integers(1, 6),
        "selection_share": st.sampled_from([0.25, 0.5, 1.0]),
    }
)
MECHANISM = st.sampled_from([OpenUniform, OpenPBA])


def build(cls, config):
    """``cls`` on ``config``; OpenPBA keeps a share for its public keys (share below 1)."""
    if cls is OpenPBA and config["selection_share"] == 1.0:
        config = {**config, "selection_share": 0.75}
    return cls(population=10**7, **config)


@settings(max_examples=25, deadline=None)
@given(cls=MECHANISM, config=CONFIG, seed=st.integers(0, 2**32 - 1))
def test_window_sums_of_eps_and_delta_stay_within_every_level(cls, config, seed):
    rng = np.random.default_rng(seed)
    m = build(cls, config)
    releases = [m.step(x.users, x.keys, rng) for x in random_events(rng, 120, max_users=120)]
    assert not window_violations(releases, m.levels)
    for i, level in enumerate(m.levels):  # and the ledger agrees with the releases
        eps, delta = m.spent()[i]
        tail = releases[-level.w :]
        assert eps == sum(r.eps_spent[i] for r in tail)
        assert delta == sum(r.delta_spent[i] for r in tail)


EVENTS = st.integers(0, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 9), min_size=n, max_size=n),
        st.lists(
            st.sampled_from(["a", "b", "c", "d", "e", "ff", "é", "a" * 30]), min_size=n, max_size=n
        ),
    )
)


@settings(max_examples=200, deadline=None)
@given(events=EVENTS, max_keys=st.integers(1, 4), salt=st.integers(0, 2**64 - 1))
def test_a_user_keeps_at_most_max_keys_distinct_keys(events, max_keys, salt):
    users, keys = np.array(events[0], dtype=np.int64), np.array(events[1], dtype=str)
    distinct, u, k, dropped = kept_pairs(users, keys, max_keys, salt)
    pairs = set(zip(u.tolist(), distinct[k].tolist(), strict=True))
    sent = set(zip(users.tolist(), keys.tolist(), strict=True))
    assert len(pairs) == u.size, "a (user, key) pair was kept twice"
    assert pairs <= sent
    for user in set(users.tolist()):
        mine = {key for who, key in sent if who == user}
        kept = {key for who, key in pairs if who == user}
        assert len(kept) == min(max_keys, len(mine))
    assert dropped == len(sent) - len(pairs)


@settings(max_examples=200, deadline=None)
@given(events=EVENTS, max_keys=st.integers(1, 4), salt=st.integers(0, 2**64 - 1))
def test_removing_a_user_moves_the_bounded_counts_by_at_most_max_keys(events, max_keys, salt):
    users, keys = np.array(events[0], dtype=np.int64), np.array(events[1], dtype=str)
    if users.size == 0:
        return
    gone = users[0]
    with_u, without = (
        bound(users, keys, max_keys, salt),
        bound(users[users != gone], keys[users != gone], max_keys, salt),
    )
    a = dict(zip(with_u.keys.tolist(), with_u.counts.tolist(), strict=True))
    b = dict(zip(without.keys.tolist(), without.counts.tolist(), strict=True))
    moved = sum(abs(a.get(x, 0) - b.get(x, 0)) for x in set(a) | set(b))
    assert moved <= max_keys
    assert all(a.get(x, 0) >= b.get(x, 0) for x in b), "another user's kept keys changed"


def test_the_kept_keys_follow_the_salt_not_the_event_order():
    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(50), 8)
    keys = np.char.add("k", rng.integers(0, 40, users.size).astype(str))
    order = rng.permutation(users.size)
    one = bound(users, keys, 2, salt=11)
    shuffled = bound(users[order], keys[order], 2, salt=11)
    other = bound(users, keys, 2, salt=12)
    assert one.keys.tolist() == shuffled.keys.tolist()
    assert one.counts.tolist() == shuffled.counts.tolist()
    assert (one.keys.tolist(), one.counts.tolist()) != (other.keys.tolist(), other.counts.tolist())


@settings(max_examples=25, deadline=None)
@given(cls=MECHANISM, config=CONFIG, seed=st.integers(0, 2**32 - 1))
def test_a_public_key_is_released_every_slot_until_retired(cls, config, seed):
    rng = np.random.default_rng(seed)
    m = build(cls, config)
    public: set[str] = set()
    quiet: dict[str, int] = {}
    for x in random_events(rng, 120, max_users=200):
        r = m.step(x.users, x.keys, rng)
        released = r.histogram()
        assert public <= set(released), f"slot {r.slot}: a public key missing"
        for key in public:
            quiet[key] = quiet[key] + 1 if released[key] < r.threshold else 0
        expected = {k for k in public if quiet[k] >= m.retire_after}
        assert set(r.retired) == expected, f"slot {r.slot}: retired {r.retired}"
        new = {k for k, n in zip(r.keys, r.new, strict=True) if n}
        assert all(released[k] >= r.threshold for k in new) or m.selection_share < 1
        public = (public - expected) | new
        quiet = {k: quiet.get(k, 0) for k in public}
        assert public == set(m.public.keys.tolist())


@settings(max_examples=60, deadline=None)
@given(cls=MECHANISM, config=CONFIG)
def test_a_one_user_key_is_released_with_probability_within_every_levels_delta_share(cls, config):
    """``Delta`` one-user keys (both sides of a pair) together pass ``tau`` with probability at
    most the slot's delta at every level, computed exactly from the discrete Laplace tail."""
    m = build(cls, config)
    eps, delta = m.selection_budget()
    per_key = singleton_release(rate(eps, m.units), m.tau)
    r = m.step(np.zeros(0, np.int64), np.zeros(0, str), np.random.default_rng(0))
    for spent in r.delta_spent:
        assert m.units * per_key <= Decimal(spent.numerator) / Decimal(spent.denominator)


def test_keys_sharing_a_hash_are_still_counted_apart(monkeypatch):
    """The hash only groups; a collision falls back to grouping the strings themselves."""
    from app.dp.open import bounding

    users = np.array([1, 2, 3, 3, 4])
    keys = np.array(["x", "y", "x", "z", "yy"])
    honest = bound(users, keys, 2, salt=3)
    monkeypatch.setattr(bounding, "key_hash", lambda k: np.zeros(np.size(k), dtype=np.uint64))
    colliding = bound(users, keys, 2, salt=3)
    count = dict(zip(colliding.keys.tolist(), colliding.counts.tolist(), strict=True))
    assert count == {"x": 2, "y": 1, "z": 1, "yy": 1}
    assert count == dict(zip(honest.keys.tolist(), honest.counts.tolist(), strict=True))


def test_a_key_hashes_alike_whatever_else_the_slot_holds():
    """The hash is the key's own: a longer key elsewhere in the slot (wider padding) changes
    nothing, else removing one user could reorder another user's keys."""
    alone = key_hash(np.array(["a", "bc"]))
    beside = key_hash(np.array(["a", "bc", "a-much-longer-key"]))
    assert alone.tolist() == beside[:2].tolist()
    assert len(set(beside.tolist())) == 3


def test_removing_the_holder_of_the_longest_key_keeps_the_others_kept_keys():
    rng = np.random.default_rng(4)
    users = np.repeat(np.arange(200), 5)
    names = [f"k{i}" for i in rng.integers(0, 60, users.size)]
    names[0] = "a-key-much-longer-than-every-other-one"
    salt, rest = 99, users != 0
    d1, u1, k1, _ = kept_pairs(users, np.array(names), 2, salt)  # as wide as the longest key
    d2, u2, k2, _ = kept_pairs(users[rest], np.array(names[5:]), 2, salt)  # 3 characters
    others = {(u, str(d1[k])) for u, k in zip(u1.tolist(), k1.tolist(), strict=True) if u != 0}
    assert others == {(u, str(d2[k])) for u, k in zip(u2.tolist(), k2.tolist(), strict=True)}
