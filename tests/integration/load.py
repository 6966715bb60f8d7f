"""Steady load with value accounting, shared by the fault tests (crash, pause, scale-out).

:class:`SteadyLoad` sends, from a thread, one value per user per slot per stream, each user at
its own tenth of the slot, stamped with the wall time of sending, and counts per slot the
values the broker *acknowledged*. :func:`account` then compares them with the releases of a
stream released at an eps so large that its geometric noise is zero (every release is then
the exact histogram of what reached it): how many values reached a release, how many were
counted twice (must be none), and which slots lost some.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

import msgpack
import numpy as np

from app.stream.collect.partitioning import PRODUCER_CONFIG


class SteadyLoad:
    """One value per user per slot for each of ``streams``; see the module docstring."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        streams: Iterable[str],
        users: int,
        d: int,
        slot_s: float,
        seed: int = 7,
    ) -> None:
        from confluent_kafka import Producer

        self.topic, self.streams, self.users, self.d, self.slot_s = (
            topic,
            tuple(streams),
            users,
            d,
            slot_s,
        )
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, **PRODUCER_CONFIG}
        )
        self.truth: dict[str, dict[int, np.ndarray]] = defaultdict(dict)
        self.values: dict[str, dict[int, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
        """Per stream and slot, each user's acknowledged value."""
        self.stop = threading.Event()
        self.last_ts = 0.0
        self._rnd = random.Random(seed)
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> SteadyLoad:
        self.thread.start()
        return self

    def finish(self) -> None:
        """Stop sending and wait until every value is acknowledged (or failed)."""
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive()

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            return
        ev = msgpack.unpackb(msg.value())  # type: ignore[attr-defined]
        slot = math.floor(ev["ts"] / self.slot_s)
        hist = self.truth[ev["stream"]].setdefault(slot, np.zeros(self.d, dtype=np.int64))
        hist[ev["value"]] += 1
        self.values[ev["stream"]][slot][ev["user"]] = ev["value"]

    def _run(self) -> None:
        sent: set[tuple[int, int]] = set()
        while not self.stop.is_set():
            now = time.time()
            slot = math.floor(now / self.slot_s)
            tenth = int((now % self.slot_s) / self.slot_s * 10)
            for u in range(tenth, self.users, 10):
                if (slot, u) in sent:
                    continue
                sent.add((slot, u))
                user = f"u{u}"
                for stream in self.streams:
                    value = self._rnd.randrange(self.d)
                    ev = msgpack.packb({"stream": stream, "user": user, "ts": now, "value": value})
                    self.producer.produce(
                        self.topic, key=user.encode(), value=ev, on_delivery=self._delivered
                    )
            self.last_ts = now
            self.producer.poll(0)
            time.sleep(0.02)
        self.producer.flush(120)


@dataclass
class Accounting:
    """What became of the values sent to one stream."""

    sent: int
    reached: int
    over: dict[int, list[int]] = field(default_factory=dict)
    """Slots whose release counts more than was sent (a value counted twice)."""
    lost: dict[int, int] = field(default_factory=dict)
    """Values sent but not in the release, per slot."""
    unreleased: list[int] = field(default_factory=list)
    """Slots with data and no release."""

    @property
    def fraction(self) -> float:
        return self.reached / self.sent if self.sent else 1.0

    def __str__(self) -> str:
        return (
            f"{self.sent} values sent, {self.reached} reached a release ({self.fraction:.4%}); "
            f"lost per slot {self.lost}; counted twice {self.over}; unreleased {self.unreleased}"
        )


def account(truth: dict[int, np.ndarray], releases: dict[int, bytes]) -> Accounting:
    """Compare the acknowledged values per slot with the (noise-free) releases per slot."""
    released = {
        slot: np.rint(msgpack.unpackb(v)["histogram"]).astype(np.int64)
        for slot, v in releases.items()
    }
    out = Accounting(sent=sum(int(t.sum()) for t in truth.values()), reached=0)
    for slot, t in sorted(truth.items()):
        r = released.get(slot)
        if r is None:
            out.unreleased.append(slot)
            continue
        out.reached += int(np.minimum(r, t).sum())
        if np.any(r > t):
            out.over[slot] = (r - t).tolist()
        if np.any(r < t):
            out.lost[slot] = int(np.maximum(t - r, 0).sum())
    return out


def releases_by_slot(kafka, topic: str, stream: str) -> dict[int, set[bytes]]:
    """Every distinct ``releases`` value of ``stream``, by slot."""
    out: dict[int, set[bytes]] = defaultdict(set)
    for m in kafka.read(topic, idle_s=1.0):
        rec = msgpack.unpackb(m.value())
        if rec["stream"] == stream:
            out[rec["slot"]].add(m.value())
    return out


def wait_released(
    kafka, topic: str, streams: Iterable[str], last_slot: int, timeout_s: float = 60.0
) -> None:
    """Wait (at most ``timeout_s``) until every stream of ``streams`` has a release of
    ``last_slot`` or later; the test then asserts on what is there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = [releases_by_slot(kafka, topic, s) for s in streams]
        if all(d and max(d) >= last_slot for d in done):
            return
        time.sleep(1)


def wait_releases(kafka, topic: str, count: int, timeout_s: float, every_s: float) -> None:
    """Wait (at most ``timeout_s``, looking every ``every_s``) until ``topic`` holds ``count``
    releases or more; the test then asserts on what is there."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(every_s)
        if len(kafka.read(topic, idle_s=0.3)) >= count:
            return


def assert_verified(kafka, prefix: str, config_path, stream: str) -> None:
    """End a fault test with ``dpstream verify`` over its topics: no violation for ``stream``
    (the per-user accountant of :mod:`app.verify`, docs/design.md invariant 6)."""
    from pathlib import Path

    from app.stream.config import load_settings
    from app.verify import verify
    from app.verify.report import to_text

    env = {"DPSTREAM_BROKER": kafka.bootstrap, "DPSTREAM_TOPIC_PREFIX": prefix}
    settings = load_settings(env, config=Path(config_path))
    verdict = verify(settings, stream, idle_s=1.0, max_s=120.0)
    print(f"\n{to_text(verdict)}")
    assert verdict.ok, to_text(verdict, show_users=True)
