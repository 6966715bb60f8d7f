"""The ``max_keys`` feasibility of an open-domain partial (:mod:`app.verify.bound`) equals a
brute force over every choice of kept keys, on small random slots."""

from __future__ import annotations

from itertools import combinations, product

from hypothesis import given, settings
from hypothesis import strategies as st

from app.verify.bound import feasible

KEYS = "abcde"


def brute_beyond(counts: dict[str, int], sent: dict[str, set[str]], max_keys: int) -> int:
    """Counts no choice of at most ``max_keys`` kept keys per user covers (overcounts aside)."""
    senders = {k: sum(k in keys for keys in sent.values()) for k in counts}
    capped = {k: min(c, senders[k]) for k, c in counts.items()}
    choices = [list(combinations(sorted(keys), min(max_keys, len(keys)))) for keys in sent.values()]
    best = 0
    for pick in product(*choices):
        cover = {k: sum(k in kept for kept in pick) for k in counts}
        best = max(best, sum(min(capped[k], cover[k]) for k in counts))
    return sum(capped.values()) - best


SLOTS = st.tuples(
    st.dictionaries(st.sampled_from(KEYS), st.integers(0, 4), max_size=5),
    st.dictionaries(
        st.sampled_from([f"u{i}" for i in range(5)]),
        st.sets(st.sampled_from(KEYS), min_size=1, max_size=4),
        max_size=5,
    ),
    st.integers(1, 3),
)


@settings(max_examples=300, deadline=None)
@given(SLOTS)
def test_the_flow_is_the_brute_force(slot: tuple) -> None:
    counts, sent, max_keys = slot
    need = feasible(counts, sent, max_keys)
    assert need.beyond == brute_beyond(counts, sent, max_keys)
    for key, over in need.overcount.items():
        assert over == counts[key] - sum(key in keys for keys in sent.values()) > 0
    assert set(need.heavy) == {u for u, keys in sent.items() if len(keys) > max_keys}


def test_one_key_too_many_is_caught() -> None:
    sent = {"u": {"a", "b", "c"}, "v": {"a"}}
    assert feasible({"a": 2, "b": 1}, sent, max_keys=2).beyond == 0
    need = feasible({"a": 2, "b": 1, "c": 1}, sent, max_keys=2)  # u counted for three keys
    assert need.beyond == 1 and need.heavy == ("u",)
