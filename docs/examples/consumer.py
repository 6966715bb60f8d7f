"""Print the releases of a dpstream deployment: a pipeline's consumer in plain Python.

It needs only ``confluent-kafka`` and ``msgpack`` (not dpstream): the record layouts it reads
are ``docs/wire.md``'s. One JSON line per released slot, on stdout::

    python docs/examples/consumer.py --bootstrap localhost:9092 --topic releases --stream web

Two layouts share the topic. A labels stream's record (layout 1) holds ``histogram`` in label
order. An open-domain stream's (``domain: open``, layout 2, ``"schema": 2``) is a key -> count
map: ``histogram[i]`` is the noisy count of ``keys[i]``, the keys sorted by code point. For
those this reader adds ``top_keys`` to the line it prints: the ``--top`` largest released
counts as ``[key, count]`` pairs, largest first (ties by key). That field is this reader's, not
the wire's; ranking released counts is post-processing and costs no privacy.

What a reader of ``releases`` must do, and this one does:

- refuse a record whose ``schema`` is newer than the layouts it knows (1 and 2): stop and
  upgrade rather than guess at new fields;
- check what it relies on: a layout-2 record carries its open-stream fields, one key per count;
- drop a slot seen before: after a crash the service may publish a slot again, byte for byte
  the same (a copy whose bytes differ would break the service's guarantee: it is reported);
- keep the noise: counts may be negative or fractional; clamping and rounding are free
  post-processing, left to whoever reads the output.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

import msgpack
from confluent_kafka import Consumer, KafkaError, TopicPartition

SCHEMA = 2
"""The newest ``releases`` layout this reader knows (``docs/wire.md``)."""
OPEN_SCHEMA = 2
"""The layout of an open-domain stream's records (a key -> count map)."""
REQUIRED = ("stream", "slot", "start", "end", "histogram", "fresh", "mechanism", "version")
OPEN_REQUIRED = (
    "keys",
    "new_keys",
    "status",
    "threshold",
    "retired",
    "spent_exact_by_group",
    "delta_spent_by_group",
    "delta_spent_exact_by_group",
)
"""What a layout-2 record carries besides layout 1's fields."""


def decode(raw: bytes) -> dict:
    """One ``releases`` value as a map; ValueError if it is not one of layout <= SCHEMA."""
    record = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    if not isinstance(record, dict):
        raise ValueError("not a map")
    schema = record.get("schema", 1)
    if not isinstance(schema, int) or schema > SCHEMA:
        raise ValueError(f"schema {schema!r}: this reader knows up to {SCHEMA}; upgrade it")
    required = REQUIRED + (OPEN_REQUIRED if schema >= OPEN_SCHEMA else ())
    missing = [name for name in required if name not in record]
    if missing:
        raise ValueError(f"missing {missing}")
    if schema >= OPEN_SCHEMA and len(record["keys"]) != len(record["histogram"]):
        raise ValueError(f"{len(record['keys'])} keys for {len(record['histogram'])} counts")
    return record


def top_keys(record: dict, k: int) -> list[list]:
    """An open stream's ``k`` largest released counts as ``[key, count]``, largest first, ties
    by key."""
    pairs = zip(record["keys"], record["histogram"], strict=True)
    ranked = sorted(pairs, key=lambda kc: (-kc[1], kc[0]))
    return [[key, count] for key, count in ranked[:k]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--topic", default="releases", help="the releases topic's name")
    parser.add_argument("--stream", help="only this stream's releases")
    parser.add_argument("--from-beginning", action="store_true", help="read the whole topic")
    parser.add_argument("--idle-exit", type=float, help="stop after this many quiet seconds")
    parser.add_argument("--top", type=int, default=10, help="open streams: top keys per slot")
    args = parser.parse_args()

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": f"example-{uuid.uuid4()}",  # a pipeline keeps one group id
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest" if args.from_beginning else "latest",
        }
    )
    seen: dict[tuple[str, int], bytes] = {}
    try:
        if args.from_beginning:
            meta = consumer.list_topics(args.topic, timeout=10).topics[args.topic]
            consumer.assign([TopicPartition(args.topic, p, 0) for p in meta.partitions])
        else:
            consumer.subscribe([args.topic])
        quiet_since = time.monotonic()
        while args.idle_exit is None or time.monotonic() - quiet_since < args.idle_exit:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    print(f"kafka: {msg.error()}", file=sys.stderr)
                continue
            quiet_since = time.monotonic()
            raw = msg.value() or b""
            try:
                record = decode(raw)
            except ValueError as exc:
                print(f"offset {msg.offset()}: {exc}", file=sys.stderr)
                return 1
            if args.stream and record["stream"] != args.stream:
                continue
            key = (record["stream"], record["slot"])
            if key in seen:
                if seen[key] != raw:
                    print(f"slot {key} published twice with different bytes", file=sys.stderr)
                continue
            seen[key] = raw
            if record.get("schema", 1) >= OPEN_SCHEMA:
                record["top_keys"] = top_keys(record, args.top)
            print(json.dumps(record), flush=True)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
