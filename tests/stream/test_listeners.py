"""The release stage's observers: :class:`Listeners` forwards every callback of
:class:`ReleaseListener` to each listener, and the worker's :class:`ReleaseMetrics` watches them
all (a callback it left to the base class would be a figure silently lost)."""

from __future__ import annotations

import inspect

from app import metrics
from app.stream.ops.late import LateSlots
from app.stream.ops.release_metrics import ReleaseMetrics
from app.stream.release.protocol import Listeners, ReleaseListener

CALLBACKS = sorted(n for n, _ in inspect.getmembers(ReleaseListener) if n.startswith("on_"))


def _args(name: str) -> list[object]:
    """One placeholder argument per parameter of the callback."""
    return [
        object() for _ in list(inspect.signature(getattr(ReleaseListener, name)).parameters)[1:]
    ]


class Recorder(ReleaseListener):
    def __init__(self) -> None:
        self.heard: list[tuple[str, tuple[object, ...]]] = []

    def __getattribute__(self, name: str) -> object:
        if name.startswith("on_"):
            return lambda *args: self.heard.append((name, args))
        return super().__getattribute__(name)


def test_listeners_forward_every_callback_to_each_listener_in_order() -> None:
    first, second = Recorder(), Recorder()
    fan = Listeners([first, second])
    sent = []
    for name in CALLBACKS:
        args = tuple(_args(name))
        getattr(fan, name)(*args)
        sent.append((name, args))
    assert first.heard == sent and second.heard == sent
    assert len(CALLBACKS) >= 11


def test_release_metrics_watch_every_callback() -> None:
    left = [n for n in CALLBACKS if getattr(ReleaseMetrics, n) is getattr(ReleaseListener, n)]
    assert left == []


def test_late_partials_count_each_slot_once_across_stages() -> None:
    """The collect stages and the release metrics share the worker's one LateSlots."""
    late = LateSlots()
    watch = ReleaseMetrics(late)

    class Stream:
        id = "late-listeners"

    before = metrics.LATE_SLOTS.labels(Stream.id)._value.get()
    partials = metrics.LATE_PARTIALS.labels(Stream.id)._value.get()
    late.mark(Stream.id, 5)  # a collect stage dropped an event of slot 5
    watch.on_late(Stream(), 5)  # the release stage dropped a partial of slot 5
    watch.on_late(Stream(), 6)
    assert metrics.LATE_SLOTS.labels(Stream.id)._value.get() == before + 2
    assert metrics.LATE_PARTIALS.labels(Stream.id)._value.get() == partials + 2
