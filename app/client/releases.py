"""Read the public ``releases`` topic: one checked, deduplicated :class:`SlotRelease` per slot.

This is the consumer side of the output a pipeline subscribes to (the record layout is
``docs/wire.md``, its type and codec :mod:`app.wire.releases`; the key is the stream id, the
value a msgpack map):

- **schema**: a record carries ``schema`` (absent means 1, the layout before the field).
  :func:`decode_release` refuses a layout newer than :data:`SCHEMA` with
  :class:`NewerSchemaError` (upgrade the reader: guessing at new fields could misread a
  histogram), and a record that breaks the layout (undecodable, a field missing or of the wrong
  type, a histogram that is not a list of numbers) with :class:`BadReleaseError`.
- **duplicates**: after a crash the service may publish a slot again, byte for byte the same
  (``topics/releases.yaml``). :class:`Deduplicator` drops such a copy by ``(stream, slot)``; a
  second copy whose bytes differ would break the service's "released exactly once" guarantee,
  so it is dropped too, counted as a conflict and logged.

- **guarantee**: a record names the privacy it carries (``guarantee``: ``eps`` over ``w`` slots
  at the default level, ``relation``, ``noise``, ``weaker`` and ``weaker_reason``, and for a
  personalized stream every level); :attr:`SlotRelease.guarantee` is None for a record written
  before the field, and :func:`guarantee_text` says so.

Everything in a release is public (noised, or post-processed from noised values), so printing
or storing it costs no privacy. Histograms may hold negative or fractional counts: that is the
noise; clamping at zero and rounding are free post-processing, left to the caller.

>>> from app.wire.releases import encode
>>> raw = encode(SlotRelease("clicks", 7, 420.0, 480.0, (3.5, -1.0), True, "pba",
...     {"strict": 0.1}, 1, 1))
>>> r = decode_release(raw)
>>> r.stream, r.slot, r.histogram, r.schema, r.start_utc
('clicks', 7, (3.5, -1.0), 1, '1970-01-01T00:07:00Z')
>>> dedup = Deduplicator()
>>> dedup.admit(r, raw), dedup.admit(decode_release(raw), raw), dedup.duplicates
(True, False, 1)
>>> from dataclasses import replace
>>> decode_release(encode(replace(r, schema=3)))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
app.wire.errors.NewerSchemaError: release record schema 3 is newer than this reader's 2: ...
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from app.wire.errors import BadRecordError as BadReleaseError
from app.wire.errors import NewerSchemaError
from app.wire.releases import FIELDS, VERSION, SlotRelease
from app.wire.releases import decode as decode_release

__all__ = ["FIELDS", "BadReleaseError", "NewerSchemaError", "SlotRelease", "decode_release"]

log = logging.getLogger(__name__)

SCHEMA = VERSION
"""The newest ``releases`` record layout this reader understands."""


def guarantee_text(guarantee: dict[str, Any] | None) -> str:
    """The guarantee of a release in words, for a person reading releases.

    >>> g = {"eps": 0.5, "w": 20, "relation": "replace", "noise": "geometric",
    ...      "weaker": False, "weaker_reason": None}
    >>> guarantee_text(g)
    'eps=0.5 over w=20 slots, replace, noise geometric, DP as implemented'
    >>> levels = {"strict": {"eps": 0.5, "w": 20}, "relaxed": {"eps": 1.0, "w": 10}}
    >>> weak = {**g, "levels": levels, "default_level": "strict", "noise": "laplace",
    ...         "weaker": True, "weaker_reason": "noise: laplace ..."}
    >>> guarantee_text(weak)  # doctest: +ELLIPSIS
    'levels strict eps=0.5 w=20 (default), relaxed eps=1 w=10, replace, noise laplace, WEAKER...'
    >>> guarantee_text(None)
    'not stated (a record written before the field)'
    """
    if guarantee is None:
        return "not stated (a record written before the field)"
    g = guarantee
    levels = g.get("levels")
    if isinstance(levels, dict) and levels:
        default = g.get("default_level")
        where = ", ".join(
            f"{name} eps={lv.get('eps'):g} w={lv.get('w')}"
            + (" (default)" if name == default else "")
            for name, lv in levels.items()
        )
        head = f"levels {where}"
    else:
        head = f"eps={g['eps']:g} over w={g['w']} slots"
    weaker = f"WEAKER: {g.get('weaker_reason')}" if g.get("weaker") else "DP as implemented"
    return f"{head}, {g['relation']}, noise {g['noise']}, {weaker}"


@dataclass
class Deduplicator:
    """Admit each ``(stream, slot)`` once; remember the last ``memory`` slots seen.

    Duplicates arrive close to their original (a crash republishes the slots it had not
    committed), so a bounded memory suffices for an endless stream.
    """

    memory: int = 100_000
    duplicates: int = 0
    conflicts: int = 0
    _seen: OrderedDict[tuple[str, int], bytes] = field(default_factory=OrderedDict, repr=False)

    def admit(self, release: SlotRelease, raw: bytes) -> bool:
        """True for the first copy of a slot; False (and counted) for any later copy."""
        key = (release.stream, release.slot)
        digest = hashlib.sha256(raw).digest()
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = digest
            if len(self._seen) > self.memory:
                self._seen.popitem(last=False)
            return True
        if seen == digest:
            self.duplicates += 1
        else:
            self.conflicts += 1
            log.warning(
                "stream %s slot %d published again with different bytes: kept the first copy",
                release.stream,
                release.slot,
            )
        return False


class ReleaseReader:
    """Iterate the released slots of the ``releases`` topic, checked and deduplicated.

    Parameters
    ----------
    config
        confluent-kafka settings: at least ``bootstrap.servers`` (plus SASL/TLS if the broker
        needs them).
    topic
        The releases topic's name (with the deployment's prefix, e.g. ``"releases"``).
    stream
        Only this stream's releases (``None``: every stream).
    from_beginning
        Start at the oldest retained release instead of the next one published.
    group_id
        ``None`` (default): read without a consumer group and commit nothing, like ``tail``.
        A group id: join that group and commit what was read, so a restarted pipeline goes on
        where it stopped (``from_beginning`` then only applies when the group has no offset).

    Records that break the layout are skipped with a warning (counted in ``bad``); a record of
    a newer layout raises :class:`NewerSchemaError` from the iteration.

    Examples
    --------
    A pipeline that stores every fresh histogram of the ``clicks`` stream::

        from app.client.releases import ReleaseReader

        with ReleaseReader({"bootstrap.servers": "kafka:9092"}, "releases", stream="clicks",
                           group_id="my-pipeline", from_beginning=True) as reader:
            for release in reader:  # blocks; one SlotRelease per slot, in slot order
                if release.fresh:
                    store(release.stream, release.start_utc, release.histogram)
    """

    def __init__(
        self,
        config: dict[str, Any],
        topic: str,
        stream: str | None = None,
        from_beginning: bool = False,
        group_id: str | None = None,
    ) -> None:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

        self.topic, self.stream = topic, stream
        self.dedup = Deduplicator()
        self.bad = 0
        settings = {
            **config,
            "group.id": group_id or "dpstream-releases-reader",
            "enable.auto.commit": group_id is not None,
            "auto.offset.reset": "earliest" if from_beginning else "latest",
        }
        self._consumer = Consumer(settings)
        if group_id is not None:
            self._consumer.subscribe([topic])
        else:
            meta = self._consumer.list_topics(topic, timeout=10).topics[topic]
            start = OFFSET_BEGINNING if from_beginning else OFFSET_END
            self._consumer.assign([TopicPartition(topic, p, start) for p in meta.partitions])

    def poll(self, timeout_s: float = 1.0) -> SlotRelease | None:
        """The next new release, or ``None`` if none came within ``timeout_s``."""
        msg = self._consumer.poll(timeout_s)
        if msg is None or msg.error():
            return None
        raw = msg.value() or b""
        if self.stream is not None and msg.key() != self.stream.encode():
            return None
        try:
            release = decode_release(raw)
        except BadReleaseError as exc:
            self.bad += 1
            log.warning(
                "skipped a bad release at %s[%d]@%d: %s",
                msg.topic(),
                msg.partition(),
                msg.offset(),
                exc,
            )
            return None
        if self.stream is not None and release.stream != self.stream:
            return None
        return release if self.dedup.admit(release, raw) else None

    def __iter__(self) -> Iterator[SlotRelease]:
        while True:
            release = self.poll()
            if release is not None:
                yield release

    def close(self) -> None:
        """Leave the group (if any) and close the connection."""
        self._consumer.close()

    def __enter__(self) -> ReleaseReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
