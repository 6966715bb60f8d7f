"""The open-domain driver: merge a slot's key counts, close it as central slots close, release.

An open-domain stream (``domain: open``, ``docs/open-domain.md``) is a central stream whose
partials carry bounded per-key counts (:class:`~app.stream.internal.OpenPartial`: each user of
the partition kept at most ``max_keys`` keys in the slot, the bound applied at ingest). Everything
about *when* a slot closes is the central driver's, unchanged (:class:`OpenDriver` is a
:class:`~app.stream.release.central.CentralDriver`): completeness per partition, ticks, the
stream's clock edge, the silent-partition and ``max_delay_s`` timeouts, replays and late data.
What differs is what a slot holds and how it is stepped:

* **Merging.** A partition's slot may come in several chunks (``chunk`` of ``chunks``); each
  chunk's keys and counts (summed over the level rows: the open mechanisms count every user
  alike) are stored as one record of the ``slots`` table under
  ``<stream> + CHUNK_SEP + slot/partition/chunk``, and the stream's open-slot index (under
  ``<stream>``, :class:`OpenKeySlot`) says which chunks came. The first copy of a chunk wins
  (a replay is dropped); a partition counts as sent once all its chunks are in. Memory and
  table size are proportional to the slot's distinct keys per partition; no string is sorted
  until the release (:func:`app.dp.open.bounding.merge_counts` groups by hash).
* **Stepping.** The slot's chunks are concatenated and handed to
  :meth:`~app.dp.open.base.OpenMechanism.step_counts` with the slot's keyed generator
  (:meth:`~app.stream.release.protocol.Publisher.rng`, the central driver's: one slot, one
  noise, even when the slot is recomputed after a crash; the merge order never changes a
  key's noise, because the mechanism steps keys in their canonical hash order).
* **Recording.** The release and audit records (:func:`app.stream.records.encode_open_release`)
  go through the same protocol (:class:`~app.stream.release.protocol.Publisher`): the
  mechanism state (the (eps, delta) window ledger per level and the public keys) and the
  records are in the ledger entry, persisted, before anything is produced.

* **Sizing.** A release shows at most the stream's ``max_released_keys`` keys (the mechanism's
  cap, :func:`app.dp.open.base.top_keys`), so the release record and the ledger entry holding it
  have a worst case: :func:`worst_sizes` builds that slot (every key ``max_key_chars`` long in
  4-byte UTF-8 characters, every count and ledger column at its widest, as many retired keys as
  shown ones) and measures it with the service's own encoders, as the producer counts a message
  (:data:`app.stream.topics.MAX_MESSAGE_BYTES`). The release agent refuses to start on a stream
  whose worst slot does not fit (:func:`check_sizes`, one ``ConfigError`` line naming the cap
  that would), so an entry always persists.

Privacy: the mechanism's argument (:class:`~app.dp.open.uniform.OpenUniform`,
:class:`~app.dp.open.absorption.OpenPBA`; ``docs/open-domain.md``, "Selection threshold")
assumes the counts it gets are bounded, which the collect stage guarantees, and that every
slot's (eps, delta) is on the ledger before its noise is drawn, which the mechanism checks. A
forced close (a partition missing) steps fewer users' counts: a subset of the data, never
more spending. Nothing here logs or exports a key or a count: only the release (noisy counts
of selected or public keys) leaves the service.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from aiokafka.record.default_records import DefaultRecordBatchBuilder

from app.dp.open import OpenMechanism, OpenRelease
from app.stream.config import StreamConfig
from app.stream.errors import ConfigError
from app.stream.internal import (
    MAX_CELLS,
    MAX_CHUNKS,
    MAX_PARTITIONS,
    MAX_SLOT,
    OpenPartial,
    Partial,
    StateError,
)
from app.stream.records import RECENT, encode_open_release, pack, unpack
from app.stream.release.central import MERGED_SUFFIX, CentralDriver
from app.stream.release.entry import LedgerEntry
from app.stream.release.protocol import StateMismatch
from app.stream.topics import MAX_MESSAGE_BYTES

log = logging.getLogger(__name__)

CHUNK_SEP = "\x00chunk\x00"
"""A chunk's ``slots`` table key is the stream id, this, then ``slot/partition/chunk``."""


@dataclass
class OpenKeySlot:
    """What came of one open slot so far: per partition its chunk count and the chunks merged,
    and each chunk's digest (``"partition.chunk"``: to tell a replay from late data)."""

    chunks: dict[int, int] = field(default_factory=dict)
    got: dict[int, list[int]] = field(default_factory=dict)
    digests: dict[str, int] = field(default_factory=dict)

    def whole(self) -> set[int]:
        """Partitions all of whose chunks came."""
        return {p for p, n in self.chunks.items() if len(self.got.get(p, ())) == n}

    def plain(self) -> dict[str, Any]:
        return {"chunks": self.chunks, "got": self.got, "digests": self.digests}


def chunk_key(sid: str, slot: int, part: int, chunk: int) -> str:
    """The ``slots`` table key of one chunk's key counts."""
    return f"{sid}{CHUNK_SEP}{slot}/{part}/{chunk}"


class OpenDriver(CentralDriver):
    """Slot merging and release of ``domain: open`` streams; see the module docstring."""

    def _index(self, sid: str) -> dict[int, OpenKeySlot]:
        return decode_index(self.slots.get(sid), sid)

    def _merge(self, stream: StreamConfig, msg: Partial | OpenPartial, next_slot: int) -> None:
        if not isinstance(msg, OpenPartial):
            log.error("partial of another domain stream=%s slot=%d", stream.id, msg.slot)
            return
        slot, part, sid = msg.slot, msg.partition, stream.id
        groups = len(stream.levels)
        if len(msg.counts) != groups * len(msg.keys):
            log.error("open partial with wrong shape stream=%s slot=%d", sid, slot)
            return
        totals = np.asarray(msg.counts, dtype=np.int64).reshape(groups, len(msg.keys)).sum(0)
        tag = f"{part}.{msg.chunk}"
        if slot < next_slot:
            self._late(stream, slot, part, tag, _digest(msg.keys, totals) if totals.any() else None)
            return
        index = self._index(sid)
        cur = index.setdefault(slot, OpenKeySlot())
        if msg.chunk in cur.got.get(part, ()):
            return  # a replayed chunk: the first one per (slot, partition, chunk) wins
        if cur.chunks.setdefault(part, msg.chunks) != msg.chunks:
            log.error("open partial chunk count changed stream=%s slot=%d", sid, slot)
            return
        kept = totals > 0
        self.slots[chunk_key(sid, slot, part, msg.chunk)] = pack(
            {"keys": [k for k, x in zip(msg.keys, kept, strict=True) if x],
             "counts": totals[kept].tolist()}
        )  # fmt: skip
        cur.got.setdefault(part, []).append(msg.chunk)
        cur.digests[tag] = _digest(msg.keys, totals)
        self.slots[sid] = encode_index(index)

    def _sent(self, stream: StreamConfig, slot: int) -> set[int]:
        cur = self._index(stream.id).get(slot)
        return cur.whole() if cur is not None else set()

    async def release_slot(
        self, stream: StreamConfig, slot: int, entry: LedgerEntry | None
    ) -> None:
        """Release ``slot`` exactly once (:mod:`app.stream.release.protocol`, steps 1-5)."""
        sid = stream.id
        mech = self.pub.mechanism(stream, entry)  # 1. Compute.
        if not isinstance(mech, OpenMechanism):
            raise StateMismatch(f"stream {sid}: an open stream's mechanism must be open_*")
        index = self._index(sid)
        cur = index.pop(slot, None)
        stored = [
            chunk_key(sid, slot, p, c) for p, cs in (cur.got if cur else {}).items() for c in cs
        ]
        keys, counts = _gather(self.slots, stored)
        started = time.perf_counter()
        rel = mech.step_counts(keys, counts, self.pub.rng(stream, slot))
        released_at = self.clock()
        lag = self.clock() - stream.slots.due(slot) if stream.clock == "wall" else None
        self.pub.watch.on_step(stream, time.perf_counter() - started, lag)
        merged = self._remember(sid, slot, dict(cur.digests) if cur is not None else {})

        def leave_open_set() -> None:  # part of step 2, right after the ledger entry
            if cur is not None:
                self.slots[sid] = encode_index(index)
            self.slots[sid + MERGED_SUFFIX] = merged
            for key in stored:
                with contextlib.suppress(KeyError):  # one found missing (_gather)
                    del self.slots[key]

        await self.pub.release(
            stream, mech, entry or LedgerEntry(), slot, [(slot, rel)], leave_open_set, released_at
        )


def _digest(keys: tuple[str, ...], totals: np.ndarray) -> int:
    """A stable 63-bit digest of a chunk: its keys and their counts."""
    raw = pack({"keys": list(keys), "counts": totals.tolist()})
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") >> 1


def _gather(slots: Any, stored: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The keys and counts of the stored chunks, concatenated (a key appears once per
    partition that kept it; the mechanism sums them). A chunk that is not a chunk raises
    :class:`StateError`: the agent counts it, drops that record and closes the slot again,
    without it (a chunk found missing), as it drops a central slot's unreadable counts."""
    keys: list[str] = []
    counts: list[int] = []
    for key in stored:
        raw = slots.get(key)
        if raw is None:
            log.error("a chunk of an open slot is missing: %r", key.split(CHUNK_SEP)[-1])
            continue
        k, c = decode_chunk(raw, key)
        keys += k
        counts += c
    return np.array(keys, dtype=np.str_), np.array(counts, dtype=np.int64)


# -- sizes ------------------------------------------------------------------------------------
UTF8_MAX = 4
"""The most UTF-8 bytes one character takes."""
WIDEST = 2**63 - 1
"""An integer msgpack writes at its widest (9 bytes)."""


def check_sizes(
    streams: Sequence[StreamConfig], deployment: str, limit: int = MAX_MESSAGE_BYTES
) -> None:
    """Refuse (one :class:`ConfigError` line) an open stream whose largest slot
    (:func:`worst_sizes`) does not fit a ``limit``-byte message."""
    for stream in streams:
        if stream.is_open and not fits(stream, stream.max_released_keys, deployment, limit):
            most = most_released_keys(stream, stream.max_released_keys, deployment, limit)
            fit = "not one fits: lower max_key_chars" if most == 0 else f"at most {most} fit"
            raise ConfigError(
                f"stream {stream.id}: a release of max_released_keys={stream.max_released_keys} "
                f"keys of max_key_chars={stream.max_key_chars} may exceed the {limit}-byte "
                f"message limit ({fit})"
            )


def message_bytes(key: bytes, value: bytes) -> int:
    """The size of one record as the producer checks it against ``max_request_size``."""
    return int(DefaultRecordBatchBuilder.estimate_size_in_bytes(key, value, []))


def table_message_bytes(key: str, value: bytes) -> int:
    """The size of the changelog record a ``ledger`` table write of ``value`` makes
    (:class:`app.stream.tables.BytesTable`: base64 text; Faust's JSON key and value codec)."""
    text = json.dumps(base64.b64encode(value).decode())
    return message_bytes(json.dumps(key).encode(), text.encode())


def worst_sizes(stream: StreamConfig, cap: int, deployment: str = "") -> tuple[int, int]:
    """The message sizes, in bytes, of the ``releases`` record and of the ``ledger`` changelog
    record (:func:`table_message_bytes`) of the largest slot ``stream`` can release showing at
    most ``cap`` keys: ``cap`` keys shown, all of them new, ``cap`` public keys retired (the
    public set never holds more), every key ``max_key_chars`` characters of 4 UTF-8 bytes, every
    count, slot and ledger column at its widest, the recent list full."""
    mech = dataclasses.replace(stream, max_released_keys=cap).build_open()
    tail = chr(0x10FFFF) * (stream.max_key_chars - 1)
    keys = [chr(0x10000 + i) + tail for i in range(2 * cap)]  # distinct, sorted
    shown, retired = keys[:cap], tuple(keys[cap:])
    mech.t = MAX_SLOT
    mech.public.load_state(
        {"keys": shown, "last": [WIDEST] * cap, "quiet": [stream.retire_after] * cap}
    )
    columns = [[WIDEST] * lv.w for lv in stream.levels]
    mech.ledger.load_state({"eps": columns, "delta": columns})
    n = len(stream.levels)
    rel = OpenRelease(
        slot=MAX_SLOT,
        keys=tuple(shown),
        counts=np.full(cap, -WIDEST, dtype=np.int64),
        new=np.ones(cap, dtype=bool),
        fresh=False,
        status="nullified",
        threshold=mech.tau,
        retired=retired,
        eps_spent=tuple(mech.ledger.eps_of(i, WIDEST) for i in range(n)),
        delta_spent=tuple(mech.ledger.delta_of(i, WIDEST) for i in range(n)),
        mechanism=mech.name,
        version=mech.version,
    )
    record, audit, recent = encode_open_release(
        stream, MAX_SLOT, rel, mech.describe(), mech.window_report(), [], 1e11, deployment
    )
    entry = LedgerEntry(
        state=mech.state_dict(),
        next_slot=MAX_SLOT,
        outbox=[("releases", record), ("audit", audit)],
        published=False,
        recent=recent * RECENT,
        seq=WIDEST,
    )
    return (
        message_bytes(stream.id.encode(), record),
        table_message_bytes(stream.id, entry.encode()),
    )


def fits(
    stream: StreamConfig, cap: int, deployment: str = "", limit: int = MAX_MESSAGE_BYTES
) -> bool:
    """Whether the largest slot showing ``cap`` keys (:func:`worst_sizes`) fits ``limit`` bytes
    (the shown keys' bytes alone exceeding it refuse at once)."""
    if cap * UTF8_MAX * stream.max_key_chars > limit:
        return False
    return max(worst_sizes(stream, cap, deployment)) <= limit


def most_released_keys(
    stream: StreamConfig, at_most: int, deployment: str = "", limit: int = MAX_MESSAGE_BYTES
) -> int:
    """The largest cap up to ``at_most`` that :func:`fits` (0: not even one key). The sizes grow
    by the same bytes per key from 16 keys on (msgpack's array headers are 3 bytes from 16 to
    65,535 items), so two small measures predict it and the last ones confirm it."""
    if fits(stream, at_most, deployment, limit):
        return at_most
    low, high = 16, 32
    if not fits(stream, low, deployment, limit):
        return next((c for c in range(low - 1, 0, -1) if fits(stream, c, deployment, limit)), 0)
    small, large = (max(worst_sizes(stream, c, deployment)) for c in (low, high))
    cap = min(at_most, low + int((limit - small) * (high - low) // (large - small)))
    while cap > low and not fits(stream, cap, deployment, limit):
        cap -= 1
    return cap


# -- the slots table records --------------------------------------------------------------------
def encode_index(index: dict[int, OpenKeySlot]) -> bytes:
    return pack({slot: cur.plain() for slot, cur in index.items()})


def decode_index(raw: bytes | None, key: str = "") -> dict[int, OpenKeySlot]:
    """A stream's open-slot index; :class:`StateError` if ``raw`` is not one."""
    if raw is None:
        return {}
    found = _load(raw, key)
    if not isinstance(found, dict) or len(found) > MAX_CELLS:
        raise StateError("slots", key, "not an open-domain slot index")
    out = {}
    for slot, cur in found.items():
        ok = (
            _int(slot, MAX_SLOT)
            and isinstance(cur, dict)
            and _int_map(cur.get("chunks"), lambda n: _int(n, MAX_CHUNKS + 1) and n > 0)
            and _int_map(
                cur.get("got"),
                lambda cs: isinstance(cs, list) and all(_int(c, MAX_CHUNKS) for c in cs),
            )
            and isinstance(cur.get("digests"), dict)
            and all(isinstance(t, str) and _int(d, 2**63) for t, d in cur["digests"].items())
        )
        if not ok:
            raise StateError("slots", key, "open-domain slot index malformed")
        out[slot] = OpenKeySlot(dict(cur["chunks"]), dict(cur["got"]), dict(cur["digests"]))
    return out


def decode_chunk(raw: bytes, key: str = "") -> tuple[list[str], list[int]]:
    """One stored chunk's keys and counts; :class:`StateError` if ``raw`` is not one."""
    found = _load(raw, key)
    keys = found.get("keys") if isinstance(found, dict) else None
    counts = found.get("counts") if isinstance(found, dict) else None
    if not (
        isinstance(keys, list)
        and isinstance(counts, list)
        and len(keys) == len(counts) <= MAX_CELLS
        and all(isinstance(k, str) for k in keys)
        and all(_int(c, 2**53 + 1) for c in counts)
    ):
        raise StateError("slots", key, "not an open-domain chunk of key counts")
    return keys, counts


def _load(raw: bytes, key: str) -> Any:
    try:
        return unpack(raw)
    except Exception as exc:  # noqa: BLE001 - any failure of the unpacker is a refusal
        raise StateError("slots", key, f"not msgpack: {type(exc).__name__}") from None


def _int(value: Any, below: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < below


def _int_map(value: Any, ok: Any) -> bool:
    return (
        isinstance(value, dict)
        and len(value) <= MAX_PARTITIONS
        and all(_int(p, MAX_PARTITIONS) and ok(v) for p, v in value.items())
    )
