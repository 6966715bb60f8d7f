"""The cap on the keys one release shows (``max_released_keys``, issue 36 review).

* a release never shows more than the cap, and the public set never holds more;
* the capped release is a function of the uncapped one alone: the same mechanism state and the
  same noise, stepped with and without the cap, give a capped release that is the top of the
  uncapped one by released count (ties by key), with the same counts; the public keys it left
  out are retired, the new ones left out never show;
* :func:`top_keys` reads nothing but the released keys and counts: any order of the same release
  keeps the same keys, and no kept key has a smaller count than a dropped one.
"""

from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.open import Level, OpenPBA, OpenUniform
from app.dp.open.base import top_keys
from app.dp.open.checks import random_events

MECHANISM = st.sampled_from([OpenUniform, OpenPBA])


def build(cls, cap, retire_after):
    """A mechanism that selects a key of a few users nearly surely (eps 40 over one slot)."""
    share = 0.5 if cls is OpenPBA else 1.0
    return cls(
        levels=[Level(1, 40.0, 1e-3)],
        population=10**6,
        max_keys=2,
        retire_after=retire_after,
        selection_share=share,
        max_released_keys=cap,
    )


def expected_top(keys, counts, cap):
    """The kept keys, written out: sort by (-count, key), take ``cap``."""
    pairs = sorted(zip(keys, counts, strict=True), key=lambda kc: (-kc[1], kc[0]))
    return {k for k, _ in pairs[:cap]}


@settings(max_examples=30, deadline=None)
@given(
    cls=MECHANISM,
    cap=st.integers(1, 6),
    retire_after=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_capped_release_is_the_top_of_the_uncapped_one(cls, cap, retire_after, seed):
    rng = np.random.default_rng(seed)
    m = build(cls, cap, retire_after)
    slots = random_events(rng, 12, max_users=60)
    for x in slots:
        twin = copy.deepcopy(m)
        twin.max_released_keys = 10**9
        twin_rng = copy.deepcopy(rng)
        public_before = set(m.public.keys.tolist())
        capped = m.step(x.users, x.keys, rng)
        full = twin.step(x.users, x.keys, twin_rng)
        assert len(capped.keys) <= cap and len(m.public) <= cap
        whole = full.histogram()
        assert set(capped.keys) == expected_top(list(whole), list(whole.values()), cap)
        assert capped.histogram() == {k: whole[k] for k in capped.keys}  # the same counts
        left_out = set(whole) - set(capped.keys)
        assert left_out & public_before <= set(capped.retired)  # public ones left out retire
        assert not left_out & set(m.public.keys.tolist())  # nothing left out stays public
        assert set(m.public.keys.tolist()) <= set(capped.keys)
        assert list(capped.keys) == sorted(capped.keys)
        assert capped.eps_spent == full.eps_spent and capped.delta_spent == full.delta_spent


@settings(max_examples=100, deadline=None)
@given(
    counts=st.lists(st.integers(-5, 5), min_size=0, max_size=30),
    cap=st.integers(1, 10),
    seed=st.integers(0, 2**32 - 1),
)
def test_top_keys_reads_the_release_alone(counts, cap, seed):
    keys = np.array([f"k{i:02d}" for i in range(len(counts))], dtype=np.str_)
    released = np.array(counts, dtype=np.int64)
    kept = top_keys(keys, released, cap)
    assert set(keys[kept].tolist()) == expected_top(keys.tolist(), counts, cap)
    perm = np.random.default_rng(seed).permutation(len(counts))  # the same release, reordered
    again = top_keys(keys[perm], released[perm], cap)
    assert set(keys[perm][again].tolist()) == set(keys[kept].tolist())
    assert int(kept.sum()) == min(cap, len(counts))
    if kept.any() and (~kept).any():
        assert released[kept].min() >= released[~kept].max()


def test_a_slot_of_many_new_keys_shows_the_cap_and_keeps_them_public():
    m = build(OpenUniform, 100, 16)
    users = np.arange(30_000)
    keys = np.char.add("item-", (users // 3).astype(str))  # 10,000 keys of 3 users
    first = m.step(users, keys, np.random.default_rng(5))
    assert len(first.keys) == 100 and first.new.all() and first.retired == ()
    assert m.public.keys.tolist() == list(first.keys)
    second = m.step(users[:0], keys[:0], np.random.default_rng(6))
    assert second.keys == first.keys and not second.new.any()


def test_the_cap_survives_a_state_round_trip():
    m = build(OpenUniform, 7, 2)
    users = np.arange(300)
    m.step(users, np.char.add("k", (users // 3).astype(str)), np.random.default_rng(1))
    back = build(OpenUniform, 7, 2)
    back.load_state(m.state_dict())
    assert back.public.keys.tolist() == m.public.keys.tolist() and len(back.public) == 7
