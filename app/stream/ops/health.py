"""What readiness measures besides the pipeline's own state: the event loop and the broker.

Under overload the collect stages' fetch timestamps go stale for two reasons that are not an
outage: the event loop is saturated (a coroutine holds it), or the consumer is behind and its
fetcher waits for the buffered records to be taken. Each is measured on its own here, so
``/readyz`` names what is true:

- :class:`LoopWatch`: a task on the worker's event loop sleeps :data:`TICK_S` and records how
  late it woke (``dpstream_event_loop_lag_seconds``: the worst of the last :data:`WINDOW_S`);
  a loop blocked right now shows too, since the HTTP thread reads the age of its last beat.
  Above :data:`SATURATED_S` readiness says ``event loop saturated``.
- :class:`BrokerProbe`: a thread asks the broker for metadata every :data:`PROBE_EVERY_S`
  (librdkafka, off the event loop). ``broker unreachable`` is said only when fetches stopped
  *and* the probe got no answer for :data:`UNREACHABLE_S`.

Both are read from the HTTP server's own thread (:mod:`app.stream.ops.http`), which answers
``/readyz`` within a second whatever the event loop is doing.

>>> w = LoopWatch()
>>> w.beat(10.0, 10.05); w.beat(10.15, 10.6)
>>> round(w.lag(10.61), 2)
0.45
>>> round(w.lag(16.0), 2)  # no beat for 5.4 s: the loop is blocked right now
5.3
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

TICK_S = 0.1
"""The loop watch's sleep."""
WINDOW_S = 5.0
"""The loop lag is the worst delay over this many seconds."""
SATURATED_S = 1.0
"""Readiness says the event loop is saturated above this lag."""
PROBE_EVERY_S = 1.0
PROBE_TIMEOUT_S = 2.0
UNREACHABLE_S = 3.0
"""No metadata answer for this long: the broker is unreachable (the collect stages' ``GAP_S``)."""


class LoopWatch:
    """The event loop's delay; see the module docstring."""

    def __init__(self) -> None:
        self._delays: deque[tuple[float, float]] = deque()
        self._last_beat: float | None = None

    def beat(self, expected: float, woke: float) -> None:
        """A :data:`TICK_S` sleep meant to end at ``expected`` ended at ``woke`` (monotonic)."""
        self._last_beat = woke
        self._delays.append((woke, max(0.0, woke - expected)))
        while self._delays and woke - self._delays[0][0] > WINDOW_S:
            self._delays.popleft()

    def lag(self, now: float | None = None) -> float:
        """The worst delay of the last :data:`WINDOW_S`, or how overdue the next beat is."""
        now = time.monotonic() if now is None else now
        recent = max((d for _, d in list(self._delays)), default=0.0)
        if self._last_beat is None:
            return recent
        return max(recent, now - self._last_beat - TICK_S)

    async def run(self, sleep: Callable[[float], Any]) -> None:
        """Beat forever on the running loop (``sleep``: :func:`asyncio.sleep`)."""
        while True:
            expected = time.monotonic() + TICK_S
            await sleep(TICK_S)
            self.beat(expected, time.monotonic())


class BrokerProbe:
    """Asks the broker for metadata from a thread; see the module docstring."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.last_answer: float | None = None
        """Monotonic time of the last metadata answer (None: no probe ran yet)."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="broker-probe", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def reachable(self, now: float | None = None) -> bool | None:
        """Whether the broker answered within :data:`UNREACHABLE_S` (None: not probed yet)."""
        if self._thread is None:
            return None
        now = time.monotonic() if now is None else now
        started = self.last_answer if self.last_answer is not None else self._started
        return now - started <= UNREACHABLE_S

    def _run(self) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(self.config)
        while not self._stop.is_set():
            try:
                admin.list_topics(timeout=PROBE_TIMEOUT_S)
                self.last_answer = time.monotonic()
            except Exception as exc:  # noqa: BLE001 - any failure is "no answer"
                log.debug("broker probe: no answer (%s)", exc)
            self._stop.wait(PROBE_EVERY_S)
