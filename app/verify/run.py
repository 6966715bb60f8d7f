"""``verify`` as a function: read a deployment's topics and judge one stream."""

from __future__ import annotations

import sys
from typing import Any

from app.stream.config import Settings, StreamConfig
from app.verify.account import account_central
from app.verify.local import account_local
from app.verify.read import Snapshot, read_snapshot
from app.verify.verdict import Verdict


def judge(stream: StreamConfig, snap: Snapshot) -> Verdict:
    """The verdict on one stream of a snapshot (pure: no broker)."""
    return account_local(stream, snap) if stream.local else account_central(stream, snap)


def verify(
    settings: Settings,
    stream_id: str,
    since: float | None = None,
    idle_s: float = 2.0,
    max_s: float = 300.0,
    progress: bool = False,
) -> Verdict:
    """Read the topics of ``settings``' deployment and judge ``stream_id``.

    Raises :class:`~app.stream.errors.ConfigError` for an unknown stream, and
    :class:`~app.verify.read.ReadError` when a topic cannot be read to its end in ``max_s``.
    """
    from app.stream.kafka import confluent_config
    from app.stream.topics import load_topics

    stream = settings.stream(stream_id)
    bar = _bar if progress else None
    snap = read_snapshot(
        confluent_config(settings),
        load_topics(settings.topic_prefix),
        stream.local,
        since=since,
        idle_s=idle_s,
        max_s=max_s,
        progress=bar,
    )
    return judge(stream, snap)


def _bar(topic: str, total: int) -> Any:
    from tqdm import tqdm

    return tqdm(total=total or None, desc=topic, unit="rec", file=sys.stderr, leave=False)
