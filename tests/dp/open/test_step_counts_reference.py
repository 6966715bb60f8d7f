"""``step_counts`` against a plain-Python reference of its split, order and cap.

The reference merges the counts in a dict, orders the keys by (hash, string) with Python's
string order (code points, as numpy's), splits public from new keys with a set and caps by
``(-count, key)``; it hands the subclass the same arrays in the same order, so the noise each
key gets follows the canonical order and the released map must be the mechanism's, slot after
slot, on long non-ASCII keys that repeat across partitions (some with zero counts).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.dp.open import Level, OpenPBA, OpenUniform
from app.dp.open.bounding import key_hash

ALPHABET = ["a", "b", "é", "ÿ", "Ω", "中", "\uffff", "😀", "𝄞", "~"]


def build(cls, share):
    return cls(levels=[Level(4, 8.0, 1e-4)], population=10**6, max_keys=1,
               retire_after=2, max_released_keys=6, selection_share=share)  # fmt: skip


def slot_counts(rng, t):
    """A slot's partials: keys of 1-200 characters (the odd one long), each in 1-3 partitions."""
    keys, counts = [], []
    for i in range(120):
        size = 200 if i % 17 == 0 else int(rng.integers(1, 6))
        key = "".join(rng.choice(ALPHABET, size))
        hot = 300 if i < 12 + t else 0
        for _ in range(int(rng.integers(1, 4))):
            keys.append(key)
            counts.append(int(rng.integers(0, 3)) + hot)
    order = rng.permutation(len(keys))
    return [keys[i] for i in order], [counts[i] for i in order]


def reference(mech, keys, counts, rng):
    """What ``step_counts`` releases, computed key by key: {key: (count, new)}, retired."""
    totals: dict[str, int] = {}
    for k, c in zip(keys, counts, strict=True):
        totals[k] = totals.get(k, 0) + c
    canonical = sorted((k for k, c in totals.items() if c > 0),
                       key=lambda k: (int(key_hash(np.array([k]))[0]), k))  # fmt: skip
    public = [str(k) for k in mech.public.keys]
    is_public = set(public)
    candidates = [k for k in canonical if k not in is_public]
    t = mech.t + 1
    plan = mech._plan(t)
    mech.ledger.ensure(plan.eps, plan.delta)
    out = mech._slot(t, np.array([totals.get(k, 0) for k in public], dtype=np.int64),
                     np.array([totals[k] for k in candidates], dtype=np.int64), rng)  # fmt: skip
    mech.ledger.record(out.spent.eps, out.spent.delta)
    mech.t = t
    chosen = [k for k, s in zip(candidates, out.selected, strict=True) if s]
    shown = dict(zip(public, out.public.tolist(), strict=True))
    shown |= dict(zip(chosen, out.released.tolist(), strict=True))
    kept = set(sorted(shown, key=lambda k: (-shown[k], k))[: mech.max_released_keys])
    retired = mech.public.settle(out.public, mech.tau, mech.retire_after,
                                 np.array([k in kept for k in public], dtype=bool))  # fmt: skip
    admitted = [k for k in chosen if k in kept]
    mech.public.admit(np.array(admitted, dtype=np.str_),
                      np.array([shown[k] for k in admitted], dtype=np.int64))  # fmt: skip
    return {k: (shown[k], k not in is_public) for k in kept}, retired


@pytest.mark.parametrize(
    ("cls", "seed", "share"),
    [(OpenUniform, 0, 1.0), (OpenUniform, 1, 1.0), (OpenUniform, 2, 0.5), (OpenPBA, 3, 0.5),
     (OpenPBA, 4, 0.25)],
)  # fmt: skip
def test_step_counts_releases_what_the_reference_does(cls, seed, share) -> None:
    mech, ref = build(cls, share), build(cls, share)
    rng = np.random.default_rng(seed)
    shown_any = False
    for t in range(6):
        keys, counts = slot_counts(rng, t)
        rel = mech.step_counts(np.array(keys), np.array(counts), np.random.default_rng([seed, t]))
        want, retired = reference(ref, keys, counts, np.random.default_rng([seed, t]))
        got = {k: (int(c), bool(n)) for k, c, n in zip(rel.keys, rel.counts, rel.new, strict=True)}
        assert got == want and rel.retired == retired
        assert list(rel.keys) == sorted(want)  # numpy's key order is Python's (code points)
        shown_any |= bool(want)
    assert shown_any and len(mech.public) > 0
    assert mech.state_dict() == ref.state_dict()
