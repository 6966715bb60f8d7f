"""The service's path into the open-domain mechanisms: ``step_counts`` on bounded counts.

* ``step(users, keys, rng)`` is ``bound`` + ``step_counts`` on the same generator: both give
  the same releases and the same state, slot after slot;
* the counts may come split (one partial per partition, one row per level) and in any order:
  the release is the same, because the noise follows the keys' canonical order;
* a state saved after any slot, loaded into a fresh mechanism and stepped with the same
  generators, gives the same releases (what the release agent relies on after a restart);
* what ``step_counts`` refuses.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.errors import ParameterError
from app.dp.open import Level, OpenPBA, OpenUniform
from app.dp.open.bounding import bound
from app.dp.open.checks import random_events
from app.dp.open.release import OpenWindowSpend

KINDS = st.sampled_from([OpenUniform, OpenPBA])


def build(cls):
    return cls(levels=[Level(4, 8.0, 1e-4), Level(2, 4.0, 1e-4)], population=10**6, max_keys=2)


def same(a, b) -> None:
    assert a.keys == b.keys and a.counts.tolist() == b.counts.tolist()
    assert a.new.tolist() == b.new.tolist() and a.retired == b.retired
    assert (a.status, a.eps_spent, a.delta_spent) == (b.status, b.eps_spent, b.delta_spent)


@settings(max_examples=15, deadline=None)
@given(cls=KINDS, seed=st.integers(0, 2**32 - 1))
def test_step_is_bound_then_step_counts(cls, seed) -> None:
    slots = random_events(np.random.default_rng(seed), 12, max_users=200)
    offline, service = build(cls), build(cls)
    for t, x in enumerate(slots):
        a = offline.step(x.users, x.keys, np.random.default_rng([seed, t]))
        rng = np.random.default_rng([seed, t])
        salt = int(rng.integers(0, 2**63))
        b = bound(x.users, x.keys, service.max_keys, salt)
        same(a, service.step_counts(b.keys, b.counts, rng))
    assert offline.state_dict() == service.state_dict()


@settings(max_examples=15, deadline=None)
@given(cls=KINDS, seed=st.integers(0, 2**32 - 1), parts=st.integers(1, 5))
def test_split_and_shuffled_counts_release_the_same(cls, seed, parts) -> None:
    rng = np.random.default_rng(seed)
    slots = random_events(rng, 8, max_users=200)
    whole, split = build(cls), build(cls)
    for t, x in enumerate(slots):
        b = bound(x.users, x.keys, 2, salt=t)
        a = whole.step_counts(b.keys, b.counts, np.random.default_rng([seed, t]))
        # each key's count cut into `parts` pieces (some zero), all pieces shuffled
        cuts = np.sort(rng.integers(0, b.counts[:, None] + 1, size=(b.counts.size, parts - 1)))
        edges = np.concatenate([np.zeros((b.counts.size, 1), int), cuts, b.counts[:, None]], 1)
        pieces = np.diff(edges, axis=1)
        keys = np.repeat(b.keys, parts)
        order = rng.permutation(keys.size)
        c = split.step_counts(keys[order], pieces.ravel()[order], np.random.default_rng([seed, t]))
        same(a, c)


@settings(max_examples=10, deadline=None)
@given(cls=KINDS, seed=st.integers(0, 2**32 - 1), cut=st.integers(1, 9))
def test_a_restored_state_continues_with_the_same_noise(cls, seed, cut) -> None:
    slots = random_events(np.random.default_rng(seed), 10, max_users=150)
    counted = [bound(x.users, x.keys, 2, salt=t) for t, x in enumerate(slots)]
    first = build(cls)
    releases = [first.step_counts(b.keys, b.counts, np.random.default_rng([seed, t]))
                for t, b in enumerate(counted)]  # fmt: skip
    again = build(cls)
    for t, b in enumerate(counted[:cut]):
        again.step_counts(b.keys, b.counts, np.random.default_rng([seed, t]))
    restored = build(cls)
    restored.load_state(again.state_dict())
    for t in range(cut, len(counted)):
        b = counted[t]
        same(releases[t], restored.step_counts(b.keys, b.counts, np.random.default_rng([seed, t])))


def test_window_report_carries_eps_and_delta_per_level() -> None:
    m = OpenUniform(levels=[Level(4, 8.0, 1e-4), Level(2, 4.0, 2e-4)], population=10**6)
    for t in range(3):
        m.step_counts(np.array(["a"]), np.array([500]), np.random.default_rng(t))
    report = m.window_report()
    assert all(isinstance(r, OpenWindowSpend) for r in report)
    # each level records its own share per slot (eps_i / w_i, delta_i / w_i): 3 slots of
    # (2, 2.5e-5) in level 0's window of 4, the last 2 of (2, 1e-4) in level 1's window of 2
    assert [(r.w, r.eps, r.delta) for r in report] == [(4, 8.0, 1e-4), (2, 4.0, 2e-4)]
    assert [(r.spent, r.delta_spent) for r in report] == [
        (Fraction(6), Fraction(3, 40_000)),
        (Fraction(4), Fraction(1, 5_000)),
    ]
    assert report[0].delta_fraction == pytest.approx(3 / 4)
    assert report[1].fraction == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("keys", "counts", "why"),
    [
        (["a", "b"], [1], "align"),
        (["a"], [-1], "non-negative integers"),
        (["a"], [1.5], "non-negative integers"),
        (["x" * 300], [1], "max_key_chars"),
    ],
)
def test_step_counts_refuses(keys, counts, why) -> None:
    m = OpenUniform(levels=[Level(4, 8.0, 1e-4)], population=10**6)
    with pytest.raises(ParameterError, match=why):
        m.step_counts(np.array(keys), np.array(counts), np.random.default_rng(0))
    assert m.t == 0
