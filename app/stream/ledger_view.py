"""``dpstream ledger show``: read a stream's ledger from its changelog topic and print it.

The ledger table's changelog (compacted, keyed by stream id) is the durable copy of the
ledger, so this works from any machine with broker access, while a worker holds the RocksDB
files. The window figures come from the mechanism's own exact ledger.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from app.stream.config import Settings, StreamConfig
from app.stream.kafka import confluent_config
from app.stream.records import unpack
from app.stream.release import window_report
from app.stream.topics import load_topics


def read_ledger(
    settings: Settings, stream_id: str, timeout_s: float = 10.0
) -> dict[str, Any] | None:
    """The last ledger entry of ``stream_id`` in the changelog, or ``None``."""
    from confluent_kafka import Consumer, TopicPartition

    topic = load_topics(settings.topic_prefix).name("ledger-changelog")
    consumer = Consumer(
        confluent_config(
            settings, **{"group.id": "dpstream-ledger-show", "enable.auto.commit": False}
        )
    )
    want = json.dumps(stream_id).encode()
    entry: dict[str, Any] | None = None
    try:
        meta = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
        for p in meta.partitions:
            lo, hi = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if hi <= lo:
                continue
            consumer.assign([TopicPartition(topic, p, lo)])
            pos = lo
            while pos < hi:
                msg = consumer.poll(timeout_s)
                if msg is None:
                    break
                if msg.error():
                    continue
                pos = (msg.offset() or 0) + 1
                if msg.key() == want:
                    value = msg.value()
                    entry = unpack(base64.b64decode(json.loads(value))) if value else None
    finally:
        consumer.close()
    return entry


def render(stream: StreamConfig, entry: dict[str, Any]) -> str:
    """Human-readable ledger: the rule, window budget per level, and the last releases."""
    mechanism = stream.build_mechanism()
    mechanism.load_state(entry["state"])
    lines = [
        f"stream {stream.id}: {mechanism.describe()}",
        f"next slot {entry['next_slot']} (last release published: {entry['published']})",
        "",
        f"{'level':<12}{'w':>6}{'eps':>10}{'window spent':>15}{'fraction':>10}",
    ]
    for level, (spent, eps, w) in zip(stream.levels, window_report(stream, mechanism), strict=True):
        lines.append(f"{level.name:<12}{w:>6}{eps:>10.4g}{spent:>15.6g}{spent / eps:>10.1%}")
    lines += ["", f"{'slot':>12}  {'fresh':<6}{'status':<10}spent by level"]
    for slot, fresh, status, spent in entry["recent"]:
        spent_txt = " ".join(f"{k}={v:.4g}" for k, v in spent.items())
        lines.append(f"{slot:>12}  {fresh!s:<6}{status:<10}{spent_txt}")
    return "\n".join(lines)
