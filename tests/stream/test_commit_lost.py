"""The release agent's consumer gives up a commit that a rebalance made void (issue 23, item 13).

Focused on the handler, on a stand-in for Faust's consumer thread (a rebalance cannot be timed
into Faust's commit from outside; ``tests/integration/test_commit_lost.py`` makes the real broker
refuse a commit of the ingest's consumer). Faust's own commit lets a ``CommitFailedError`` pass
but crashes the consumer, and with it the worker, on the ``IllegalStateError`` aiokafka raises
when the partitions went away between Faust's look at its assignment and the commit.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiokafka.errors import (
    CommitFailedError,
    IllegalGenerationError,
    IllegalStateError,
    KafkaConnectionError,
)
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.types import TP

from app import metrics
from app.stream import agent_transport

ASSIGNED = TP("p", 0)
STALE = CommitFailedError(
    "Commit cannot be completed since the group has already rebalanced and may have assigned "
    "the partitions to another member"
)


class FakeClient:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error
        self.commits: list[dict[Any, Any]] = []

    async def commit(self, offsets: dict[Any, Any]) -> None:
        if self.error is not None:
            raise self.error
        self.commits.append(offsets)


class FakeThread:
    """What a Faust consumer thread's commit uses of itself."""

    def __init__(self, error: BaseException | None) -> None:
        self.client = FakeClient(error)
        self.tp_last_committed_at: dict[TP, float] = {}
        self.crashed: list[BaseException] = []
        self.log = logging.getLogger("fake-thread")

    def assignment(self) -> set[TP]:
        return {ASSIGNED}

    def _ensure_consumer(self) -> FakeClient:
        return self.client

    async def crash(self, exc: BaseException) -> None:
        self.crashed.append(exc)


def lost() -> float:
    return metrics.COMMITS_LOST.labels("release", "rebalance")._value.get()


def test_faust_alone_crashes_when_the_partitions_went_away():
    gone = IllegalStateError("No partitions assigned")
    thread = FakeThread(gone)
    assert not asyncio.run(AIOKafkaConsumerThread._commit(thread, {ASSIGNED: 5}))  # type: ignore[arg-type]
    assert thread.crashed == [gone]


@pytest.mark.parametrize(
    "error",
    [
        STALE,
        IllegalStateError("No partitions assigned"),
        CommitFailedError(),
        IllegalGenerationError(),
    ],
)
def test_a_commit_lost_to_a_rebalance_is_given_up_and_counted(error: BaseException):
    thread, before = FakeThread(error), lost()
    assert asyncio.run(agent_transport.commit(thread, {ASSIGNED: 5})) is False
    assert thread.crashed == []
    assert lost() == before + 1


def test_another_failure_still_crashes_the_consumer():
    error = KafkaConnectionError("gone")
    thread = FakeThread(error)
    assert asyncio.run(agent_transport.commit(thread, {ASSIGNED: 5})) is False
    assert thread.crashed == [error]


def test_a_commit_lands_for_the_assigned_partitions_only():
    thread = FakeThread(None)
    assert asyncio.run(agent_transport.commit(thread, {ASSIGNED: 5, TP("p", 1): 9})) is True
    [offsets] = thread.client.commits
    assert [(tp.topic, tp.partition, meta.offset) for tp, meta in offsets.items()] == [("p", 0, 5)]
    assert set(thread.tp_last_committed_at) == {ASSIGNED}
