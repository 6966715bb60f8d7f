"""``verify`` on an open-domain stream: a clean run has no finding, and each planted defect is
caught (a user counted for ``max_keys + 1`` keys, a key counted more often than sent, a
release overspending eps or delta in a window), on hand-built topic contents (no broker)."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from app.stream.collect.partitioning import partition_for
from app.stream.internal import OpenPartial
from app.stream.records import pack
from app.verify import judge
from app.verify.report import to_dict, to_text
from tests.verify.build import PARTITIONS, Topics, stream_of

OPEN = """
streams:
  - id: urls
    domain: open
    slot_s: 10.0
    grace_s: 1.0
    max_keys: 2
    mechanism: open_uniform
    levels: [{name: std, w: 3, eps: 3.0, delta: 3.0e-4, population: 100000}]
"""
SLOTS = range(100, 108)
USERS = [f"u{i}" for i in range(8)]
EPS_T, DELTA_T = 1.0, 1e-4
"""What each slot spends: eps / w and delta / w."""


class OpenTopics(Topics):
    """:class:`Topics` with an open stream's records."""

    def key_event(self, user: str, ts: float, key: str) -> None:
        p = partition_for(user.encode(), PARTITIONS)
        raw = msgpack.packb({"stream": self.stream.id, "user": user, "ts": ts, "value": key})
        self.snap.events.append(self._msg("events", p, int(1000 * ts), user.encode(), raw))

    def open_partial(self, slot: int, partition: int, counts: dict[str, int], sent: float) -> None:
        keys = tuple(sorted(counts))
        raw = OpenPartial(
            self.stream.id, slot, partition, PARTITIONS, keys, [counts[k] for k in keys]
        ).encode()
        self.snap.partials.append(self._msg("partials", 0, int(sent * 1000), b"urls", raw))

    def open_audit(self, slot: int, eps: float, delta: float) -> None:
        raw = pack(
            {
                "stream": self.stream.id,
                "slot": slot,
                "spent_by_group": {"std": eps},
                "delta_spent_by_group": {"std": delta},
            }
        )
        self.snap.audit.append(self._msg("audit", 0, 0, b"urls", raw))


def keys_of(user: str, slot: int) -> list[str]:
    """Three keys per user and slot: two shared ones and one of the user's own."""
    i = USERS.index(user)
    return [f"page-{(i + slot) % 3}", f"page-{3 + i % 2}", f"own-{user}-{slot}"]


def clean(tmp_path: Path) -> tuple[OpenTopics, dict[tuple[int, int], dict[str, int]]]:
    """A correct run: each user sends three keys per slot and keeps two (its first two by
    name: any choice within the bound is one the secret order could have made)."""
    t = OpenTopics(stream_of(tmp_path, OPEN))
    parts: dict[tuple[int, int], dict[str, int]] = {}
    for slot in SLOTS:
        for i, user in enumerate(USERS):
            sent = keys_of(user, slot)
            for j, key in enumerate(sent):
                t.key_event(user, slot * 10 + 1 + i * 0.5 + j * 0.1, key)
            t.key_event(user, slot * 10 + 9, sent[0])  # a repeat: one value
            counts = parts.setdefault((slot, partition_for(user.encode(), PARTITIONS)), {})
            for key in sorted(sent)[:2]:
                counts[key] = counts.get(key, 0) + 1
        for p in range(PARTITIONS):
            t.open_partial(slot, p, parts.get((slot, p), {}), sent=slot * 10 + 11.5)
        t.release(slot, [], at=slot * 10 + 12.0)
        t.open_audit(slot, EPS_T, DELTA_T)
    return t, parts


def replace_partial(t: OpenTopics, slot: int, p: int, counts: dict[str, int]) -> None:
    """Put ``counts`` first for ``(slot, p)``: the release agent keeps the first partial."""
    t.open_partial(slot, p, counts, sent=slot * 10 + 11.5)
    t.snap.partials.insert(0, t.snap.partials.pop())


def test_a_clean_open_run_has_no_violation(tmp_path: Path) -> None:
    t, _ = clean(tmp_path)
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict, show_users=True)
    n = len(USERS) * len(SLOTS)
    assert verdict.released == 2 * n  # two keys per user and slot reached a release
    assert verdict.not_released == {"max_keys": n}  # the third, by the bound
    (level,) = verdict.levels
    assert level.users == len(USERS)
    assert level.worst == pytest.approx(1.0) and level.worst_delta == pytest.approx(1.0)
    text = to_text(verdict)
    assert "delta=0.0003" in text and "1.0000 of delta" in text
    assert to_dict(verdict)["levels"][0]["worst_window_delta_fraction"] == pytest.approx(1.0)


def test_a_user_counted_for_max_keys_plus_one(tmp_path: Path) -> None:
    t, parts = clean(tmp_path)
    p = partition_for(b"u3", PARTITIONS)
    counts = dict(parts[103, p])
    dropped = sorted(keys_of("u3", 103))[2]  # u3's third key, which the bound drops ...
    counts[dropped] = counts.get(dropped, 0) + 1  # ... counted too
    replace_partial(t, 103, p, counts)
    verdict = judge(t.stream, t.snap)
    assert verdict.counts == {"key_bound": 1}, to_text(verdict)
    (found,) = verdict.violations
    assert found.slots == (103,) and "u3" in found.users


def test_a_key_counted_more_often_than_sent(tmp_path: Path) -> None:
    t, parts = clean(tmp_path)
    p = partition_for(b"u5", PARTITIONS)
    counts = dict(parts[105, p])
    counts["never-sent"] = 1
    replace_partial(t, 105, p, counts)
    verdict = judge(t.stream, t.snap)
    assert verdict.counts == {"overcount": 1}, to_text(verdict)
    assert verdict.violations[0].users == ()  # nobody sent it


@pytest.mark.parametrize(("what", "kind"), [("delta", "delta_overspend"), ("eps", "overspend")])
def test_a_release_overspending_its_window(tmp_path: Path, what: str, kind: str) -> None:
    t, _ = clean(tmp_path)
    t.snap.audit = [m for m in t.snap.audit if msgpack.unpackb(m.value)["slot"] != 104]
    extra = {"eps": EPS_T, "delta": DELTA_T}
    extra[what] *= 1.5  # slot 104 spends half a share more: every window over it is over
    t.open_audit(104, extra["eps"], extra["delta"])
    verdict = judge(t.stream, t.snap)
    assert verdict.kinds() == {kind}, to_text(verdict)
    assert verdict.counts[kind] == len(USERS)  # each user's worst window, once
    assert {v.users[0] for v in verdict.violations} == set(USERS)


def test_only_the_users_of_an_overspent_slot_are_named(tmp_path: Path) -> None:
    """The check is per user: a user absent from the slots of a window is not charged them."""
    t, _ = clean(tmp_path)
    slot = SLOTS[-1] + 2  # a slot after a gap, where only u0 sends
    t.key_event("u0", slot * 10 + 1, "late-night")
    t.open_partial(slot, partition_for(b"u0", PARTITIONS), {"late-night": 1}, slot * 10 + 11.5)
    for p in range(PARTITIONS):
        if p != partition_for(b"u0", PARTITIONS):
            t.open_partial(slot, p, {}, slot * 10 + 11.5)
    t.release(slot - 1, [], at=slot * 10 + 2.0)
    t.release(slot, [], at=slot * 10 + 12.0)
    t.open_audit(slot - 1, 0.0, 0.0)
    t.open_audit(slot, EPS_T, 2.5 * DELTA_T)  # with 107's share: over for u0 only
    verdict = judge(t.stream, t.snap)
    assert verdict.kinds() == {"delta_overspend"}, to_text(verdict)
    assert [v.users for v in verdict.violations] == [("u0",)]


def test_chunks_are_one_partial_and_a_slot_missing_a_chunk_is_unclosed(tmp_path: Path) -> None:
    t, parts = clean(tmp_path)
    p = partition_for(b"u2", PARTITIONS)
    counts = parts[104, p]
    keys = tuple(sorted(counts))
    half = len(keys) // 2
    t.snap.partials = [m for m in t.snap.partials if not _is(m, 104, p)]
    for chunk, part in enumerate((keys[:half], keys[half:])):
        raw = OpenPartial(
            "urls", 104, p, PARTITIONS, part, [counts[k] for k in part], chunk, 2
        ).encode()
        t.snap.partials.append(t._msg("partials", 0, 1051_500, b"urls", raw))
    verdict = judge(t.stream, t.snap)
    assert verdict.ok and verdict.released == 2 * len(USERS) * len(SLOTS), to_text(verdict)
    t.snap.partials.pop()  # the second chunk never came: the slot's partition is not whole
    verdict = judge(t.stream, t.snap)
    assert verdict.ok, to_text(verdict)
    users_there = [u for u in USERS if partition_for(u.encode(), PARTITIONS) == p]
    assert verdict.not_released["unclosed"] == 2 * len(users_there)


def test_an_open_slot_released_twice_with_different_noise(tmp_path: Path) -> None:
    t, _ = clean(tmp_path)
    t.release(103, [1.0], at=1100.0)
    verdict = judge(t.stream, t.snap)
    assert verdict.kinds() == {"release_differs"}, to_text(verdict)
    assert verdict.violations[0].slots == (103,)


def _is(m, slot: int, p: int) -> bool:
    rec = msgpack.unpackb(m.value)
    return rec["slot"] == slot and rec["partition"] == p
