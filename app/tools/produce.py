"""``dpstream produce``: synthetic central-mode events, with every delivery accounted for.

Each central stream of the configuration gets one producer thread sending ``--rate`` events/s
from ``--users`` synthetic users (seeded): a labels stream's users pick categories whose
popularity drifts (:class:`DriftingLabels`); an open stream's users send Zipf-distributed keys
``item-<rank>`` (:class:`ZipfKeys`), and a quarter of its events come from the user of the
event before, so users hold several keys in a slot and the ``max_keys`` bound acts. Every
message has a delivery callback: :class:`Deliveries` counts what the broker acknowledged and
what librdkafka gave up on (after ``message.timeout.ms``, 30 s here), and a line goes to stderr
whenever new failures appear, so a broker that goes away is never a silent loss. At the end
(``--duration``, SIGTERM or Ctrl-C) each producer flushes for up to :data:`FLUSH_S` seconds;
the verb prints ``delivered N, failed N, undelivered N`` and exits 1 if any message was not
delivered.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.stream.cli import match_config
from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.stream.config import Settings, StreamConfig, load_settings
from app.stream.kafka import confluent_config, probe, probe_timeout_s
from app.stream.ops.status import DEMO_NOTES_KEY
from app.stream.topics import Topics, load_topics
from app.wire import events

REPORT_EVERY_S = 5.0
"""At most one progress line about failures per this many seconds."""

QUIET = logging.getLogger("dpstream.produce.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

FLUSH_S = 10.0
"""How long each producer waits at the end for the messages still queued."""

MESSAGE_TIMEOUT_MS = 30_000
"""librdkafka gives up on a message after this long (its default is 5 minutes)."""

TICK_S = 1.0
"""The synthetic producer sends a second's events at once, stamped with the same time: one
batch per partition and tick. The embedded broker (Tansu 0.6.0, in memory) pays on every fetch
and produce for each batch a partition holds and never drops one, so the batch count, not the
event count, bounds how long a demo runs (``docs/capacity.md``, The embedded broker's limits):
at 1 batch/s per partition it holds 7,200 per partition after 2 hours."""

LINGER_MS = 100
"""librdkafka's ``linger.ms``: long enough for a tick's burst to leave as one batch per
partition, short against every stream's grace (an event is stamped before it waits)."""


@dataclass
class Deliveries:
    """Delivery outcomes of the producers (thread-safe): acknowledged, failed, still queued."""

    delivered: int = 0
    failed: int = 0
    undelivered: int = 0
    broker_errors: int = 0
    last_error: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self, err: Any, _msg: Any) -> None:
        """The producers' ``on_delivery`` callback."""
        with self._lock:
            if err is None:
                self.delivered += 1
            else:
                self.failed += 1
                self.last_error = err.str() if hasattr(err, "str") else str(err)

    def broker_error(self, err: Any) -> None:
        """The producers' ``error_cb``: librdkafka's client-level errors (connection lost...)."""
        with self._lock:
            self.broker_errors += 1
            self.last_error = err.str() if hasattr(err, "str") else str(err)

    def left(self, queued: int) -> None:
        """Count ``queued`` messages that were still in a producer's queue at the end."""
        with self._lock:
            self.undelivered += queued

    @property
    def lost(self) -> int:
        """Messages that did not reach the broker: failed plus undelivered."""
        return self.failed + self.undelivered

    def line(self) -> str:
        text = f"delivered {self.delivered}, failed {self.failed}, undelivered {self.undelivered}"
        return text + (f" (last error: {self.last_error})" if self.last_error else "")


class Truth:
    """The exact histogram of each recent slot of the synthetic events (``dpstream demo`` only).

    Counted as the service counts: one value per user and slot, the user's first event of the
    slot (later ones are duplicates). Kept for the last :attr:`keep` slots of each stream. This
    is the data itself: only the demo shows it, next to the releases, on synthetic users. Local
    streams' truths (the simulated devices' value frequencies) arrive whole through
    :meth:`put` (:class:`app.tools.simulator.DeviceWatch`).

    >>> from app.stream.config import DEFAULT_STREAMS, load_streams
    >>> stream = load_streams(DEFAULT_STREAMS)[0]
    >>> t = Truth()
    >>> for user, value in [("a", 1), ("b", 1), ("a", 2)]:
    ...     t.add(stream, 100.0, user, value)
    >>> t.histogram(stream.id, stream.slots.slot_of(100.0))[:3], t.histogram(stream.id, 1)
    ([0, 2, 0], None)
    """

    def __init__(self, keep: int = 64) -> None:
        self.keep = keep
        self._slots: dict[str, dict[int, dict[str, int]]] = {}
        self._d: dict[str, int] = {}
        self._given: dict[str, dict[int, list[float]]] = {}
        self._notes: dict[str, dict[int, str]] = {}
        self._lock = threading.Lock()

    def note(self, stream_id: str, slot: int, text: str) -> None:
        """A sentence about a slot for the status page (local demo: devices that did not
        answer in time), written under :data:`~app.stream.ops.status.DEMO_NOTES_KEY`."""
        with self._lock:
            notes = self._notes.setdefault(stream_id, {})
            notes[slot] = text
            for old in [s for s in notes if s <= slot - self.keep]:
                del notes[old]

    def put(self, stream_id: str, slot: int, histogram: list[float]) -> None:
        """A slot's whole true histogram (a local stream's frequencies), for :meth:`dump`."""
        with self._lock:
            slots = self._given.setdefault(stream_id, {})
            slots[slot] = list(histogram)
            for old in [s for s in slots if s <= slot - self.keep]:
                del slots[old]

    def add(self, stream: StreamConfig, ts: float, user: str, value: int) -> None:
        slot = stream.slots.slot_of(ts)
        with self._lock:
            self._d[stream.id] = stream.d
            slots = self._slots.setdefault(stream.id, {})
            slots.setdefault(slot, {}).setdefault(user, value)
            for old in [s for s in slots if s <= slot - self.keep]:
                del slots[old]

    def dump(self, path: Path) -> None:
        """Write every kept slot's counts as JSON ``{stream: {slot: counts}}`` (atomically),
        and the notes under :data:`~app.stream.ops.status.DEMO_NOTES_KEY`, for the worker's
        status page in the demo."""
        with self._lock:
            keys = [(sid, list(slots)) for sid, slots in self._slots.items()]
            given = {
                sid: {str(s): h for s, h in slots.items()} for sid, slots in self._given.items()
            }
            notes = {
                sid: {str(s): t for s, t in slots.items()} for sid, slots in self._notes.items()
            }
        doc: dict[str, dict[str, Any]] = {
            sid: {str(s): self.histogram(sid, s) for s in slots} for sid, slots in keys
        }
        for sid, slots in given.items():
            doc.setdefault(sid, {}).update(slots)
        if notes:
            doc[DEMO_NOTES_KEY] = notes
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)

    def histogram(self, stream_id: str, slot: int) -> list[int] | None:
        """The slot's exact counts, or ``None`` when no event of it was produced here."""
        with self._lock:
            values = self._slots.get(stream_id, {}).get(slot)
            if values is None:
                return None
            counts = [0] * self._d[stream_id]
            for v in values.values():
                counts[v] += 1
            return counts


def synthetic_events(
    settings: Settings,
    topics: Topics,
    stream: StreamConfig,
    rate: float,
    users: int,
    stop: threading.Event,
    deliveries: Deliveries | None = None,
    truth: Truth | None = None,
) -> None:
    """Produce ``rate`` events/s for ``stream`` until ``stop`` is set (seeded, drifting).

    Serves delivery callbacks as it goes and flushes for up to :data:`FLUSH_S` at the end;
    messages still queued then are counted in ``deliveries.undelivered``. With ``truth`` (the
    demo), each event is also counted there.
    """
    from confluent_kafka import Producer

    deliveries = deliveries if deliveries is not None else Deliveries()
    per_tick = max(1, int(rate * TICK_S))
    producer = Producer(
        confluent_config(
            settings,
            **{
                "linger.ms": LINGER_MS,
                "queue.buffering.max.messages": max(100_000, 2 * per_tick),
                "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                "error_cb": deliveries.broker_error,  # summarized by produce_events
                "logger": QUIET,  # instead of one stderr line per reconnection attempt
                **PRODUCER_CONFIG,
            },
        )
    )
    rng = np.random.default_rng(2024)
    values = ZipfKeys(stream, rng) if stream.is_open else DriftingLabels(stream, rng)
    due = time.monotonic()
    while not stop.is_set():
        now = time.time()
        picked, index = values.draw(users, per_tick)
        for u, v, i in zip(*picked, index, strict=True):
            user = f"user-{u}"
            event = events.Event(stream.id, user, now, v)
            try:
                producer.produce(
                    topics.events,
                    key=user.encode(),
                    value=events.encode(event),
                    on_delivery=deliveries,
                )
            except BufferError:  # local queue full: the broker is not taking them
                deliveries(_QueueFull(), None)
                continue
            if truth is not None and i >= 0:
                truth.add(stream, now, user, int(i))
        producer.poll(0)
        due += TICK_S
        stop.wait(max(0.0, due - time.monotonic()))
    deliveries.left(producer.flush(FLUSH_S))


Draw = tuple[tuple[npt.NDArray[np.int64], list[str]], npt.NDArray[np.int64]]
"""One tick's events: (user indices, values), and each value's label index (-1: a key)."""


class DriftingLabels:
    """A labels stream's values: categories whose popularity drifts 5 % per tenth of a second."""

    def __init__(self, stream: StreamConfig, rng: np.random.Generator) -> None:
        self.labels, self.rng = stream.labels, rng
        self.weights = rng.dirichlet(np.ones(stream.d))
        self.keep = 0.95 ** (TICK_S / 0.1)

    def draw(self, users: int, n: int) -> Draw:
        d = len(self.labels)
        self.weights = self.keep * self.weights + (1 - self.keep) * self.rng.dirichlet(np.ones(d))
        who = self.rng.integers(0, users, n)
        index = self.rng.choice(d, n, p=self.weights)
        return (who, [self.labels[v] for v in index]), index


class ZipfKeys:
    """An open stream's values: keys ``item-<rank>`` with Zipf(:data:`ZIPF_A`) ranks (a few keys
    many users send, a long tail one user sends), cut to their last ``max_key_chars``
    characters; :data:`SAME_USER` of the events come from the user of the event before, so
    users send several keys in a slot and the ``max_keys`` bound acts."""

    def __init__(self, stream: StreamConfig, rng: np.random.Generator) -> None:
        self.limit, self.rng = stream.max_key_chars, rng

    def draw(self, users: int, n: int) -> Draw:
        who = self.rng.integers(0, users, n)
        same = np.flatnonzero(self.rng.random(n) < SAME_USER)
        same = same[same > 0]
        who[same] = who[same - 1]  # in order: a run of several keys from one user
        ranks = np.minimum(self.rng.zipf(ZIPF_A, n), MAX_RANK)
        keys = [f"item-{r}"[-self.limit :] for r in ranks.tolist()]
        return (who, keys), np.full(n, -1, dtype=np.int64)


ZIPF_A = 1.3
"""The Zipf exponent of :class:`ZipfKeys`' ranks."""
MAX_RANK = 10**6
"""The largest rank :class:`ZipfKeys` draws (the tail beyond it folds onto it)."""
SAME_USER = 0.25
"""The share of an open stream's events sent by the user of the event before."""


class _QueueFull:
    """The error of a message refused by a full local queue (counted as failed)."""

    def str(self) -> str:
        return "local producer queue full"


def produce_events(args: argparse.Namespace) -> int:
    """The ``produce`` verb; 0 if every message was delivered, else 1 (2: configuration)."""
    settings = load_settings(config=args.config)
    topics = load_topics(settings.topic_prefix)
    central = [s for s in settings.streams if not s.local]
    if not central:
        print(
            f"dpstream produce: no central stream in {settings.config_path}; pass --config "
            "with a `mode: central` stream",
            file=sys.stderr,
        )
        return 2
    timeout_s = getattr(args, "broker_timeout", None) or probe_timeout_s()
    probe(settings, timeout_s)
    match_config(settings, timeout_s)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    deliveries = Deliveries()
    threads = [
        threading.Thread(
            target=synthetic_events,
            args=(settings, topics, s, args.rate, args.users, stop, deliveries),
        )
        for s in central
    ]
    for t in threads:
        t.start()
    print(
        f"produce: {args.rate:g} events/s per stream, {args.users} users, streams "
        f"{[s.id for s in central]} -> {topics.events}",
        file=sys.stderr,
    )
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    reported = (0, 0)
    last_report = 0.0
    try:
        while not stop.wait(0.5):
            now = time.monotonic()
            seen = (deliveries.failed, deliveries.broker_errors)
            if seen != reported and now - last_report >= REPORT_EVERY_S:
                reported, last_report = seen, now
                print(f"produce: trouble so far: {deliveries.line()}", file=sys.stderr)
            if deadline is not None and time.monotonic() >= deadline:
                break
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for t in threads:
            t.join(FLUSH_S + 5)
    print(f"produce: {deliveries.line()}", file=sys.stderr)
    if deliveries.lost:
        print(f"dpstream produce: {deliveries.lost} messages not delivered", file=sys.stderr)
        return 1
    return 0
