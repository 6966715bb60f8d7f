"""Shared fixtures of ``tests/stream``: streams files, stream configs and settings, no broker.

- ``central_stream(**fields)`` / ``local_stream(**fields)``: the YAML mapping of one stream,
  a small default (a PBA stream ``s`` of 3 labels; an LPA stream ``loc`` of 2 labels and 60
  users) updated by ``fields``;
- ``streams_file(*streams)``: a streams YAML file holding those mappings (its path);
- ``load_configs(*streams, env=None)``: the :class:`StreamConfig` tuple of such a file;
- ``make_settings(*streams, **env)``: :class:`Settings` from such a file (default: one central
  stream) and ``DPSTREAM_*`` variables, with :data:`NOISE_KEY_HEX` as the noise key and
  :data:`NOWHERE` as the broker;
- ``fake_kafka``: in-memory stand-ins for the aiokafka consumer and producer, so the batch
  services' offset, send and side-input logic runs without a broker.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from aiokafka import TopicPartition

from app.stream.config import Settings, StreamConfig, load_settings, load_streams

NOISE_KEY_HEX = "cd" * 16
NOWHERE = "127.0.0.1:1"
"""The settings' broker: nothing listens there, and no test here connects."""
Stream = dict[str, Any]


def _central(**fields: Any) -> Stream:
    return {
        "id": "s",
        "labels": ["a", "b", "c"],
        "slot_s": 10,
        "grace_s": 1,
        "release_timeout_s": 1,
        "mechanism": {"name": "pba"},
        "levels": [{"name": "only", "w": 3, "eps": 1.0}],
        **fields,
    }


def _local(**fields: Any) -> Stream:
    return {
        "id": "loc",
        "mode": "local",
        "labels": ["a", "b"],
        "slot_s": 10,
        "round_s": 2,
        "release_timeout_s": 1,
        "mechanism": {"name": "lpa", "params": {"users": 60, "oracle": "grr"}},
        "levels": [{"name": "only", "w": 3, "eps": 1.0}],
        **fields,
    }


@pytest.fixture
def central_stream() -> Callable[..., Stream]:
    return _central


@pytest.fixture
def local_stream() -> Callable[..., Stream]:
    return _local


@pytest.fixture
def streams_file(tmp_path: Path) -> Callable[..., Path]:
    counter = itertools.count()

    def write(*streams: Stream) -> Path:
        path = tmp_path / f"streams-{next(counter)}.yaml"
        path.write_text(yaml.safe_dump({"streams": list(streams)}, sort_keys=False))
        return path

    return write


@pytest.fixture
def load_configs(streams_file: Callable[..., Path]) -> Callable[..., tuple[StreamConfig, ...]]:
    def load(*streams: Stream, env: dict[str, str] | None = None) -> tuple[StreamConfig, ...]:
        return load_streams(streams_file(*streams), env=env or {})

    return load


@pytest.fixture
def make_settings(streams_file: Callable[..., Path]) -> Callable[..., Settings]:
    def make(*streams: Stream, **env: str) -> Settings:
        path = streams_file(*(streams or (_central(),)))
        key = {"DPSTREAM_NOISE_KEY": NOISE_KEY_HEX, "DPSTREAM_DEPLOYMENT": "test"}
        env = {**key, "DPSTREAM_BROKER": NOWHERE, **env}
        return load_settings(env=env, config=path)

    return make


# -- in-memory stand-ins for the aiokafka clients of app.str ---------------------------------------


@dataclass
class Rec:
    """A consumed record: what the services read of an aiokafka ``ConsumerRecord``."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int = 0
    """Kafka timestamp, milliseconds."""


def report_rec(offset: int, value: bytes | None) -> Rec:
    """A consumed ``reports`` record of partition 0 at ``offset`` (no key): what the report
    collector reads of one."""
    return Rec("reports", 0, offset, None, value)


class FakeConsumer:
    """The aiokafka consumer calls the batch services make, over in-memory partition logs.

    ``logs[p]`` holds partition ``p``'s values (or ``(key, value, timestamp_ms)`` triples); a
    test may append to it. Positions start at 0; ``getmany`` returns what lies between the
    position and the end and moves the position; ``commit`` records the offsets.
    """

    def __init__(self, topic: str, logs: dict[int, list[Any]]) -> None:
        self.topic = topic
        self.logs = logs
        self.positions: dict[TopicPartition, int] = {}
        self.committed: list[dict[TopicPartition, int]] = []
        self.polled_ms: dict[TopicPartition, int] = {}

    def stop_after_first_poll(self, service: Any, before: Any = None) -> None:
        """Make ``service``'s consume loop end after one turn: its first ``getmany`` stops the
        service, then polls (``before``: an awaitable factory awaited first)."""
        poll = self.getmany

        async def once(**kwargs: Any) -> dict[TopicPartition, list[Rec]]:
            if before is not None:
                await before()
            service._stopped.set()
            return await poll(**kwargs)

        self.getmany = once  # type: ignore[method-assign]

    def rec(self, p: int, offset: int) -> Rec:
        item = self.logs[p][offset]
        key, value, ts = item if isinstance(item, tuple) else (None, item, 0)
        return Rec(self.topic, p, offset, key, value, ts)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return set(self.logs) if topic == self.topic else None

    async def topics(self) -> set[str]:
        return {self.topic}

    def assignment(self) -> set[TopicPartition]:
        return set(self.positions)

    def assign(self, tps: list[TopicPartition]) -> None:
        self.positions = {tp: 0 for tp in tps}

    async def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.positions[tp] = 0

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp] = offset

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: len(self.logs[tp.partition]) for tp in tps}

    def highwater(self, tp: TopicPartition) -> int:
        return len(self.logs[tp.partition])

    def last_poll_timestamp(self, tp: TopicPartition) -> int | None:
        return self.polled_ms.get(tp)

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]

    async def getmany(
        self, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[Rec]]:
        out = {}
        for tp, pos in self.positions.items():
            end = len(self.logs[tp.partition])
            if pos < end:
                out[tp] = [self.rec(tp.partition, o) for o in range(pos, end)]
                self.positions[tp] = end
        return out

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.committed.append(dict(offsets))


class FakeProducer:
    """An aiokafka producer that keeps what it sent; ``fail[topic]`` sends to ``topic`` fail."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.fail: dict[str, int] = {}
        self.flushes = 0

    async def send(
        self, topic: str, key: bytes | None = None, value: bytes = b"", partition: int | None = None
    ) -> asyncio.Future[None]:
        delivery: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.fail.get(topic, 0) > 0:
            self.fail[topic] -= 1
            delivery.set_exception(OSError(f"send to {topic} failed"))
        else:
            self.sent.append((topic, key, value))
            delivery.set_result(None)
        return delivery

    async def flush(self) -> None:
        self.flushes += 1

    def values(self, topic: str) -> list[bytes]:
        return [v for t, _, v in self.sent if t == topic]


@pytest.fixture
def fake_kafka() -> SimpleNamespace:
    """``fake_kafka.Consumer(topic, logs)``, ``fake_kafka.Producer()``, ``fake_kafka.Rec``."""
    return SimpleNamespace(Consumer=FakeConsumer, Producer=FakeProducer, Rec=Rec)
