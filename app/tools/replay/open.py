"""The replay of an open-domain stream (``domain: open``): key -> count maps in and out.

The rows are decoded by the service's event rules (:func:`app.wire.events.decode_batch`: a key
that is not a non-empty string, or longer than ``max_key_chars``, is refused with the reason the
service dead-letters it under) and slotted by the stream's slot clock. Each slot's events are
bounded to ``max_keys`` distinct keys per user by the service's keyed order
(:func:`app.dp.open.bounding.bound`), and the stream's open mechanism releases the bounded counts
with :meth:`~app.dp.open.OpenMechanism.step_counts` on the slot's noise
(:func:`~app.stream.release.protocol.slot_rng`). The exact histogram kept beside each release is
the bounded counts the mechanism was given (what a noiseless release would show).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np

from app.dp.open import OpenMechanism
from app.dp.open.bounding import bound
from app.stream.config import StreamConfig
from app.stream.release.protocol import slot_rng
from app.tools.replay.read import BadRow, Row
from app.tools.replay.run import OpenReleased, Released, Replay
from app.wire import events


class OpenReplay(Replay):
    """:class:`Replay` for an open stream: events by slot, bounded, the open mechanism."""

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
        self.domains = {stream.id: events.Domain.of(stream)}
        self.events: dict[int, tuple[list[int], list[str]]] = {}
        self.user_ids: dict[str, int] = {}
        self.newest = -math.inf

    def add(self, rows: list[Row], on_bad: Callable[[BadRow], None]) -> None:
        slots = self.stream.slots
        kept: list[Row] = []
        for row in rows:
            if row.value is None:
                continue  # a preference: an open stream's counts do not depend on levels
            if self.first is not None and slots.slot_of(row.ts) < self.first:
                self.tally.before_first += 1
                continue
            kept.append(row)
        self.tally.rows += len(rows)
        raws: list[bytes | None] = []
        for row in kept:
            try:
                raws.append(self._record(row).value)
            except (OverflowError, TypeError, ValueError) as exc:
                raws.append(None)
                on_bad(BadRow(row.line, "undecodable", f"cannot be encoded ({exc})"[:200]))
        batch = events.decode_batch(raws, self.domains)
        keys = batch.keys or [""] * len(kept)
        for i, row in enumerate(kept):
            if raws[i] is None:
                continue
            if batch.codes[i]:
                bad = batch.error(i)
                on_bad(BadRow(row.line, bad.reason, bad.detail))
                continue
            slot = slots.slot_of(float(batch.ts[i]))
            users, slot_keys = self.events.setdefault(slot, ([], []))
            users.append(self.user_ids.setdefault(batch.users[i], len(self.user_ids)))
            slot_keys.append(keys[i])
            self.tally.outcomes["accepted"] += 1
            self.newest = max(self.newest, float(batch.ts[i]))
            if self.next_slot is None:
                self.next_slot = slot

    def close_before(self, ts: float) -> Iterator[Released | OpenReleased]:
        top = self.stream.slots.last_closable(ts)
        if self.last is not None:
            top = min(top, self.last)
        yield from self._release_through(top)

    def finish(self) -> Iterator[Released | OpenReleased]:
        last = self.last
        if last is None and self.newest > -math.inf:
            last = self.stream.slots.slot_of(self.newest)
        if last is None or self.next_slot is None:
            return
        self.last = last
        yield from self._release_through(last)

    def _release_through(self, top: int) -> Iterator[Released | OpenReleased]:
        if self.next_slot is None:
            return
        while self.next_slot <= top:
            slot = self.next_slot
            users, keys = self.events.pop(slot, ([], []))
            rng = slot_rng(self.key, self.deployment, self.stream, slot)
            salt = int(rng.integers(0, 2**63))
            bounded = bound(
                np.asarray(users, dtype=np.int64),
                np.asarray(keys, dtype=np.str_),
                self.open.max_keys,
                salt,
                self.open.max_key_chars,
            )
            exact = dict(zip(bounded.keys.tolist(), bounded.counts.tolist(), strict=True))
            rel = self.open.step_counts(bounded.keys, bounded.counts, rng)
            yield OpenReleased(slot, rel, exact, self.open.window_report())
            self.next_slot = slot + 1
