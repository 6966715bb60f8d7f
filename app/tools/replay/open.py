"""The replay of an open-domain stream (``domain: open``): key -> count maps in and out.

Counting is the collect stage's own, as for every stream (:class:`~app.tools.replay.run.Replay`):
the :class:`~app.stream.collect.events.Collector` decodes the rows by the event rules (a key
that is not a non-empty string, or longer than ``max_key_chars``, is refused with the reason
the service dead-letters it under), slots them, and bounds each user to ``max_keys`` distinct
keys per slot by the service's keyed order, salted per slot from the replay's key
(:func:`app.dp.open.salt.slot_salt`: with the deployment's key, the very keys the service
keeps). What it flushes is the :class:`~app.stream.internal.OpenPartial` chunks a worker
sends; the slot's chunks are summed per key (over groups) and the stream's open mechanism
releases them with :meth:`~app.dp.open.OpenMechanism.step_counts` on the slot's noise
(:func:`~app.stream.release.protocol.slot_rng`), as the release agent's
:class:`~app.stream.release.open.OpenDriver` does. The exact histogram kept beside each release
is those bounded counts (what a noiseless release would show).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from app.dp.open import OpenMechanism
from app.stream.config import StreamConfig
from app.stream.internal import OpenPartial
from app.stream.release.protocol import slot_rng
from app.tools.replay.run import OpenReleased, Released, Replay


class OpenReplay(Replay):
    """:class:`Replay` for an open stream: the partials' key counts, the open mechanism."""

    def __init__(
        self,
        stream: StreamConfig,
        key: bytes,
        deployment: str,
        first: int | None = None,
        last: int | None = None,
    ) -> None:
        super().__init__(stream, key, deployment, first, last)
        assert isinstance(self.mech, OpenMechanism)  # build_mechanism of an open stream
        self.open = self.mech
        self.keys: dict[int, dict[str, int]] = {}

    def _keep(self, partials: list[Any]) -> None:
        for p in partials:
            if not isinstance(p, OpenPartial) or not p.keys:
                continue
            totals = np.asarray(p.counts, dtype=np.int64).reshape(-1, len(p.keys)).sum(axis=0)
            slot = self.keys.setdefault(p.slot, {})
            for k, c in zip(p.keys, totals.tolist(), strict=True):
                if c:
                    slot[k] = slot.get(k, 0) + c

    def _release_through(self, top: int) -> Iterator[Released | OpenReleased]:
        if self.next_slot is None:
            return
        while self.next_slot <= top:
            slot = self.next_slot
            exact = self.keys.pop(slot, {})
            keys = np.asarray(list(exact), dtype=np.str_)
            counts = np.asarray(list(exact.values()), dtype=np.int64)
            rng = slot_rng(self.key, self.deployment, self.stream, slot)
            rel = self.open.step_counts(keys, counts, rng)
            yield OpenReleased(slot, rel, exact, self.open.window_report())
            self.next_slot = slot + 1
