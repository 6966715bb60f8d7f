"""Hand-built topic contents for the verify tests, and a reference collect stage.

:class:`Topics` writes records the way the worker's wire formats do (``app.stream.records``),
into a :class:`~app.verify.read.Snapshot`. :func:`reference_partials` is a plain-loop collect
stage written for these tests only (its own slot and level rule, one user at a time), so the
property tests compare verify against a third, deliberately naive implementation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import msgpack

from app.stream.collect.partitioning import partition_for
from app.stream.config import StreamConfig, load_streams
from app.stream.internal import Partial
from app.stream.records import pack
from app.verify.read import Msg, Snapshot

PARTITIONS = 4
CENTRAL = """
streams:
  - id: s
    labels: [a, b, c]
    slot_s: 10.0
    grace_s: 1.0
    mechanism: {name: uniform}
    levels:
      - {name: strict, w: 5, eps: 1.0}
      - {name: loose, w: 3, eps: 4.0}
"""
LOCAL = """
streams:
  - id: l
    mode: local
    labels: ["off", "on"]
    slot_s: 2.0
    round_s: 0.4
    release_timeout_s: 0.3
    mechanism: {name: lpa, params: {users: 100, oracle: grr}}
    levels: [{name: standard, w: 3, eps: 2.0}]
"""


def stream_of(tmp: Path, text: str) -> StreamConfig:
    path = tmp / "streams.yaml"
    path.write_text(text)
    return load_streams(path)[0]


class Topics:
    """Records of every topic verify reads, built by hand; :meth:`snapshot` hands them over."""

    def __init__(self, stream: StreamConfig) -> None:
        self.stream = stream
        self.snap = Snapshot(input_partitions=PARTITIONS)
        self._offsets: dict[tuple[str, int], int] = defaultdict(int)

    def _msg(
        self, topic: str, partition: int, t_ms: int, key: bytes | None, value: bytes | None
    ) -> Msg:
        off = self._offsets[topic, partition]
        self._offsets[topic, partition] += 1
        return Msg(partition, off, t_ms, key, value)

    def event(self, user: str, ts: float, value: int, appended: float | None = None) -> None:
        p = partition_for(user.encode(), PARTITIONS)
        raw = msgpack.packb({"stream": self.stream.id, "user": user, "ts": ts, "value": value})
        t_ms = int(1000 * (ts if appended is None else appended))
        self.snap.events.append(self._msg("events", p, t_ms, user.encode(), raw))

    def preference(self, user: str, level: str | None, at: float) -> None:
        p = partition_for(user.encode(), PARTITIONS)
        raw = None if level is None else msgpack.packb({"level": level})
        self.snap.preferences.append(
            self._msg("preferences", p, int(at * 1000), user.encode(), raw)
        )

    def levels(self, user: str, changes: list[tuple[float, str | None]]) -> None:
        p = partition_for(user.encode(), PARTITIONS)
        raw = pack({"changes": [[at, lv] for at, lv in changes], "truncated": False})
        self.snap.levels.append(self._msg("levels", p, 0, user.encode(), raw))

    def read_preferences(self, at: float) -> None:
        """The worker's offset markers on ``levels`` at time ``at``: it has read every
        ``preferences`` record written so far."""
        for p in range(PARTITIONS):
            n = self._offsets["preferences", p]
            if n:
                key = b"\x00offset:" + str(p).encode()
                self.snap.levels.append(
                    self._msg("levels", p, int(at * 1000), key, pack({"offset": n}))
                )

    def partial(self, slot: int, partition: int, counts: list[int], sent: float) -> None:
        raw = Partial(self.stream.id, slot, partition, PARTITIONS, counts).encode()
        self.snap.partials.append(self._msg("partials", 0, int(sent * 1000), b"s", raw))

    def release(self, slot: int, histogram: list[float], at: float) -> None:
        raw = pack(
            {
                "stream": self.stream.id,
                "slot": slot,
                "histogram": histogram,
                "released_at": at,
                "schema": 1,
            }
        )
        self.snap.releases.append(self._msg("releases", 0, int(at * 1000), b"s", raw))

    def audit(self, slot: int, spent: dict[str, float]) -> None:
        levels = self.stream.levels
        raw = pack(
            {
                "stream": self.stream.id,
                "slot": slot,
                "spent_by_group": spent,
                "eps_by_group": {lv.name: lv.eps for lv in levels},
                "w_by_group": {lv.name: lv.w for lv in levels},
            }
        )
        self.snap.audit.append(self._msg("audit", 0, 0, b"s", raw))

    def request(self, t: int, rnd: str, eps: list[float]) -> None:
        raw = pack(
            {
                "stream": self.stream.id,
                "slot": 1000 + t,
                "request": {"slot": t, "round": rnd, "eps": eps},
            }
        )
        self.snap.requests.append(self._msg("requests", 0, 0, b"l", raw))

    def report(self, user: int, t: int, rnd: str, payload: list[int], group: int = 0) -> None:
        raw = msgpack.packb(
            {
                "stream": self.stream.id,
                "mechanism": "lpa",
                "slot": t,
                "round": rnd,
                "user": user,
                "group": group,
                "oracle": "grr",
                "payload": payload,
            }
        )
        self.snap.events.append(self._msg("reports", user % PARTITIONS, 0, str(user).encode(), raw))


def reference_group(
    stream: StreamConfig, changes: list[tuple[float, str | None]], slot: int
) -> int | None:
    """The level rule, once more, as a plain walk over slots."""
    names = [lv.name for lv in stream.levels]
    w = [lv.w for lv in stream.levels]
    level = stream.default_level
    blocked_until = -math.inf
    for at, name in changes:
        new = names.index(name) if name in names else stream.default_level
        if new == level:
            continue
        start = math.floor(at / stream.slot_s) + 1
        if slot < start:
            break
        blocked_until = start + max(w[level], w[new])
        level = new
    return None if slot < blocked_until else level


def reference_partials(
    stream: StreamConfig,
    events: list[tuple[str, float, int]],
    histories: dict[str, list[tuple[float, str | None]]],
    slots: range,
) -> dict[tuple[int, int], list[int]]:
    """Every ``(slot, partition)`` partial a correct collect stage sends (``events`` in the order
    they were appended)."""
    m, d = len(stream.levels), stream.d
    out = {(s, p): [0] * (m * d) for s in slots for p in range(PARTITIONS)}
    taken: set[tuple[str, int]] = set()
    for user, ts, value in events:
        slot = math.floor(ts / stream.slot_s)
        if (user, slot) in taken or slot not in slots:
            continue
        taken.add((user, slot))
        g = reference_group(stream, histories.get(user, []), slot)
        if g is not None:
            out[slot, partition_for(user.encode(), PARTITIONS)][g * d + value] += 1
    return out
