"""The device simulator: N devices of one local stream answering requests over Kafka.

One process plays every device of a stream with a :class:`~app.client.fleet.Fleet` (the SDK's
membership and ledger per device, vectorized perturbation). It reads ``collection-requests``
from the start (manual assignment, no consumer group), ignores requests of other streams and
requests whose deadline has passed, skips a request it already answered (the service re-sends
the stored bytes of a pending request after a crash: counted as ``duplicates``, never refused),
asks :class:`ValueSource` for every device's true value at
the request's slot, and produces one ``reports`` record per report (key: the user index as
decimal text; value: the report's fields plus ``stream``, msgpack). A device the service asks
beyond its window refuses: nothing is sent, and the refusal is counted in :class:`Stats`; so
does a device whose own clock disagrees with the request's wall-clock slot (``start``, ``end``;
:mod:`app.client.clock`), counted as ``clock_refused``. Every device is enrolled with the
stream's slot grid from the streams file (:func:`enrollments`), never from a request.

True values (``--values``):

* ``synthetic:<law>`` (``sin``, ``log``, ``tlns``/``lns``): at the mechanism's slot ``t`` every
  device holds 1 with probability ``p_t`` (the papers' binary streams,
  :mod:`app.bench.engine.synthetic`), else 0; ``synthetic:wave`` is the demo's law,
  ``p_t = 0.5 + 0.4 sin(2 pi t / 16)``, a full swing every 16 slots (about a minute at 4 s
  slots), so an adaptive mechanism sees enough change to publish most slots;
* ``dataset:<name>`` (:func:`app.bench.engine.datasets.load`): device ``i`` holds user ``i mod N``'s
  value at slot ``(t - 1) mod T``; a device without a record in that slot does not answer.

A device's value is drawn once per slot: both rounds of a slot see the same values.

With a :class:`DeviceWatch` (``dpstream demo`` only), the simulator also records what only the
devices know: per slot, the true frequencies of their values, how many devices were asked and
how many did not answer before the request's deadline; per level, the most one device spent in
any window of its ``w`` slots, read from the devices' own ledgers. This is synthetic data the
simulator made up; nothing of it comes from, or goes to, the service.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from app.client.clock import When
from app.client.device import Enrollment
from app.client.fleet import Answer, Fleet
from app.dp.local.wire import mask_users
from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.wire import preferences, reports, requests

log = logging.getLogger(__name__)

SYNTHETIC_SLOTS = 100_000
"""Slots of ``p_t`` precomputed for ``synthetic:<law>`` (the law repeats after them)."""

WAVE_SLOTS = 16
"""The period, in slots, of ``synthetic:wave``."""


def wave(slots: int) -> npt.NDArray[np.float64]:
    """``p_t = 0.5 + 0.4 sin(2 pi t / WAVE_SLOTS)`` for ``t = 1..slots`` (the demo's law).

    >>> [round(float(p), 2) for p in wave(8)]
    [0.65, 0.78, 0.87, 0.9, 0.87, 0.78, 0.65, 0.5]
    """
    t = np.arange(1, slots + 1, dtype=np.float64)
    return np.asarray(0.5 + 0.4 * np.sin(2 * np.pi * t / WAVE_SLOTS), dtype=np.float64)


class ValueSource:
    """Every device's true value at a mechanism slot ``t`` (1-based); see the module docstring."""

    def __init__(self, spec: str, devices: int, d: int, rng: np.random.Generator) -> None:
        kind, _, name = spec.partition(":")
        self.devices, self.rng = devices, rng
        self._p: npt.NDArray[np.float64] | None = None
        self._values: npt.NDArray[Any] | None = None
        self._last: tuple[int, npt.NDArray[np.int64]] | None = None
        if kind == "synthetic" and name == "wave":
            self._p = wave(SYNTHETIC_SLOTS)
        elif kind == "synthetic":
            from app.bench.engine.synthetic import probabilities

            self._p = probabilities(name or "sin", SYNTHETIC_SLOTS, rng)
        elif kind == "dataset":
            from app.bench.engine.datasets import load

            ds = load(name)
            if ds.d != d:
                raise ValueError(f"dataset {name!r} has d={ds.d}, the stream has d={d}")
            self._values = ds.values
        else:
            raise ValueError(f"values must be synthetic:<law> or dataset:<name>, got {spec!r}")

    def at(self, t: int) -> npt.NDArray[np.int64]:
        """Values of devices ``0 .. devices-1`` at slot ``t`` (-1: no value); drawn once per
        slot, so the rounds of a slot see the same values."""
        if self._last is not None and self._last[0] == t:
            return self._last[1]
        if self._p is not None:
            p = self._p[(t - 1) % self._p.shape[0]]
            out: npt.NDArray[np.int64] = (self.rng.random(self.devices) < p).astype(np.int64)
        else:
            assert self._values is not None
            row = self._values[(t - 1) % self._values.shape[0]]
            out = np.asarray(row[np.arange(self.devices) % row.shape[0]], dtype=np.int64)
        self._last = (t, out)
        return out


@dataclass
class Stats:
    """What the simulated devices did."""

    requests: int = 0
    expired: int = 0
    reports: int = 0
    refused: int = 0
    clock_refused: int = 0
    no_value: int = 0
    duplicates: int = 0

    def line(self) -> str:
        return (
            f"requests={self.requests} expired={self.expired} reports={self.reports} "
            f"refused={self.refused} clock_refused={self.clock_refused} "
            f"no_value={self.no_value} duplicates={self.duplicates}"
        )


@dataclass
class SlotAnswers:
    """What the devices of one stream did for one (wall-clock) slot, over its rounds."""

    asked: int = 0
    """Devices asked (summed over the slot's rounds)."""
    late: int = 0
    """Asked devices whose answer was not on the broker before the round's deadline: the
    request reached them after it, or their reports were sent after it."""
    refused: int = 0
    """Asked devices that refused (own ledger, clock or level)."""
    truth: list[float] | None = None
    """The true frequency of each value among the devices with a value."""

    def problems(self, slot: int) -> list[str]:
        """What went wrong with the slot's answers, in plain words (none: [])."""
        out = []
        if self.late:
            out.append(
                f"{self.late} of {self.asked} devices asked did not answer slot {slot} before "
                "its deadline"
                + (
                    " (none answered in time: the machine may be too busy for this many "
                    "simulated devices)"
                    if self.late >= self.asked
                    else ""
                )
            )
        if self.refused:
            out.append(
                f"{self.refused} of {self.asked} devices asked refused slot {slot} (their own "
                "ledger, clock or level)"
            )
        return out


class DeviceWatch:
    """What only the simulated devices know (``dpstream demo``): per stream and slot a
    :class:`SlotAnswers`, and per stream and level the most one device spent in any window of
    its level's ``w`` slots (:data:`~app.dp.budget.PEAK_LABEL`), from the devices' ledgers.

    With ``truth`` (:class:`~app.tools.produce.Truth`), each slot's true frequencies also go
    there, for the status page, with what went wrong (:meth:`SlotAnswers.problems`). Keeps
    the last ``keep`` slots of each stream; thread-safe.
    """

    def __init__(self, truth: Any = None, keep: int = 64) -> None:
        self.truth, self.keep = truth, keep
        self._slots: dict[str, dict[int, SlotAnswers]] = {}
        self._peaks: dict[str, dict[int, Fraction]] = {}
        self._lock = threading.Lock()

    def slot(self, stream_id: str, slot: int) -> SlotAnswers | None:
        """The devices' answers for ``slot`` (None: no request of it reached the devices)."""
        with self._lock:
            return self._slots.get(stream_id, {}).get(slot)

    def peaks(self, stream_id: str) -> dict[int, Fraction]:
        """Level index -> the most one device of that level spent in any window of ``w``
        slots, in eps (levels without a report yet: absent)."""
        with self._lock:
            return dict(self._peaks.get(stream_id, {}))

    def record(
        self,
        stream: Any,
        slot: int,
        values: npt.NDArray[np.int64],
        asked: int,
        late: int = 0,
        refused: int = 0,
        spent: dict[int, Fraction] | None = None,
    ) -> None:
        """One round of ``slot``: the devices' values, how many were asked, answered late or
        refused, and per level the largest window spend of a device that reported."""
        have = values[values >= 0]
        counts = np.bincount(have, minlength=stream.d)[: stream.d]
        truth = [float(c) / max(1, have.size) for c in counts]
        with self._lock:
            slots = self._slots.setdefault(stream.id, {})
            s = slots.setdefault(slot, SlotAnswers())
            s.asked, s.late, s.refused, s.truth = (
                s.asked + asked,
                s.late + late,
                s.refused + refused,
                truth,
            )
            problems = s.problems(slot)
            for old in [k for k in slots if k <= slot - self.keep]:
                del slots[old]
            peaks = self._peaks.setdefault(stream.id, {})
            for level, x in (spent or {}).items():
                peaks[level] = max(x, peaks.get(level, Fraction(0)))
        if self.truth is not None:
            self.truth.put(stream.id, slot, truth)
            if problems:
                self.truth.note(stream.id, slot, "; ".join(problems))


def _window_spent(fleet: Fleet, answer: Answer, slot: int) -> dict[int, Fraction]:
    """Per level, the most a device that reported in ``answer`` spent in its window of ``w``
    slots ending at ``slot`` (its own ledger; a device's sums only grow at its reports, so the
    maximum over these is the maximum over every window)."""
    out: dict[int, int] = {}
    ledgers: dict[int, Any] = {}
    for report in answer.reports:
        device = fleet.devices[report.user]
        units = device.ledger.window(slot)
        if units > out.get(device.group, -1):
            out[device.group], ledgers[device.group] = units, device.ledger
    return {g: ledgers[g].budget.to_fraction(u) for g, u in out.items()}


def enrollments(stream: Any, devices: int) -> list[Enrollment]:
    """Users ``0 .. devices-1`` of a local stream, each with its level's ``(w, eps)`` and group,
    enrolled on the stream's slot grid (``slot_s``, origin: the start of the service's slot 0).

    The devices take the groups the mechanism states for them
    (:meth:`~app.dp.interfaces.RoundDriven.user_groups`: contiguous index blocks per level): as
    ``plbu`` assigns them, and, for the PLDP-IDS mechanisms, the planned mix the simulated users
    then choose on ``preferences`` (:func:`choose_levels`); otherwise every user is in the
    stream's only level.
    """
    groups = stream.build_local().user_groups()
    out = []
    for i in range(devices):
        g = int(groups[i])
        level = stream.levels[min(g, len(stream.levels) - 1)]
        out.append(
            Enrollment(
                user=i,
                w=level.w,
                eps=level.eps,
                group=g,
                slot_s=stream.slot_s,
                origin_s=stream.slots.start(0),
            )
        )
    return out


def choose_levels(producer: Any, topic: str, stream: Any, fleet: Fleet) -> int:
    """Tell the service the level of every device not at the stream's default (a
    ``preferences`` record, key: the user index in decimal), as users of a personalized stream
    do; returns how many records were sent. Other mechanisms assign levels themselves."""
    if not stream.build_local().takes_levels():
        return 0
    sent = 0
    for device in fleet.devices:
        if device.group != stream.default_level:
            level = stream.levels[device.group].name
            producer.produce(
                topic,
                key=str(device.enrollment.user).encode(),
                value=preferences.encode(preferences.Preference(level)),
            )
            sent += 1
    producer.flush(30)
    return sent


def run_devices(
    consumer_config: dict[str, Any],
    requests_topic: str,
    reports_topic: str,
    stream: Any,
    devices: int,
    values: ValueSource,
    stop: threading.Event,
    rng: np.random.Generator,
    stats: Stats | None = None,
    tolerance_s: float | None = None,
    preferences_topic: str | None = None,
    watch: DeviceWatch | None = None,
) -> Stats:
    """Answer ``stream``'s requests with ``devices`` simulated devices until ``stop`` is set.

    ``consumer_config`` is a librdkafka configuration (``bootstrap.servers`` and security);
    ``tolerance_s`` is how far the devices' clock may disagree with the service's (None:
    :class:`~app.client.clock.DeviceClock`'s default, 2 s capped at a quarter slot). With
    ``preferences_topic``, the devices of a personalized stream first publish their levels
    (:func:`choose_levels`). With ``watch``, every request is also recorded there
    (:class:`DeviceWatch`).
    """
    from confluent_kafka import Consumer, Producer, TopicPartition

    if devices > stream.users:
        raise ValueError(
            f"devices ({devices}) must be at most the registered users ({stream.users})"
        )
    stats = stats if stats is not None else Stats()
    fleet = Fleet(enrollments(stream, devices), tolerance_s)
    consumer = Consumer(
        {
            **consumer_config,
            "group.id": "dpstream-devices",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,  # a round lasts seconds: see requests at once
        }
    )
    producer = Producer(
        {
            **consumer_config,
            "linger.ms": 5,
            "queue.buffering.max.messages": 1_000_000,
            **PRODUCER_CONFIG,
        }
    )
    answered: set[bytes] = set()  # requests answered, byte for byte
    try:
        if preferences_topic is not None:
            chosen = choose_levels(producer, preferences_topic, stream, fleet)
            log.info("levels chosen stream=%s devices=%d", stream.id, chosen)
        meta = consumer.list_topics(requests_topic, timeout=10).topics[requests_topic]
        consumer.assign([TopicPartition(requests_topic, p, 0) for p in meta.partitions])
        while not stop.is_set():
            msg = consumer.poll(0.1)
            if msg is None or msg.error() or msg.value() is None:
                continue
            req = requests.decode(msg.value())
            received = time.time()  # the devices' own clock
            if req.stream != stream.id:
                continue
            if received > req.deadline:
                stats.expired += 1
                if watch is not None:
                    late = req.request
                    asked = int(mask_users(late, devices).sum())
                    watch.record(stream, req.slot, values.at(late.slot), asked, asked)
                continue
            if msg.value() in answered:
                stats.duplicates += 1  # re-sent after a service restart: answered already
                continue
            answered.add(msg.value() or b"")
            request = req.request
            stats.requests += 1
            truth = values.at(request.slot)
            answer = fleet.respond(request, truth, rng, When.on_wire(req, received))
            for report in answer.reports:
                producer.produce(
                    reports_topic,
                    key=str(report.user).encode(),
                    value=reports.encode(report.record(stream.id)),
                )
            producer.flush(30)
            if watch is not None:
                refused = len(answer.refused) + len(answer.clock_refused)
                sent = len(answer.reports)
                watch.record(
                    stream,
                    req.slot,
                    truth,
                    sent + refused + answer.no_value,
                    sent if time.time() > req.deadline else 0,
                    refused,
                    _window_spent(fleet, answer, request.slot),
                )
            stats.reports += len(answer.reports)
            stats.refused += len(answer.refused)
            stats.clock_refused += len(answer.clock_refused)
            stats.no_value += answer.no_value
            if answer.refused or answer.clock_refused:
                log.warning(
                    "devices refused stream=%s slot=%d round=%s refused=%d clock_refused=%d",
                    stream.id,
                    request.slot,
                    request.round,
                    len(answer.refused),
                    len(answer.clock_refused),
                )
            log.info(
                "answered stream=%s slot=%d round=%s reports=%d",
                stream.id,
                request.slot,
                request.round,
                len(answer.reports),
            )
    finally:
        producer.flush(10)
        consumer.close()
    return stats
