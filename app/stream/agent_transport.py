"""The release agent's Kafka consumer, with a short fetch wait.

Faust builds its consumer with ``fetch_max_wait_ms=1500`` written in the driver, not a setting.
A broker that answers an empty fetch only at the end of that wait (Tansu does) then delays a
partial by up to 1.5 s before the release agent sees it, and that is most of a release's
latency. :func:`app` makes the worker's Faust app with a transport whose consumer waits at
most :data:`FETCH_WAIT_MS`: the agent then hears partials within 50 ms, at the
cost of more (empty) fetch requests while the topic is quiet.

Its commit (:func:`commit`) gives up an offset commit that a rebalance made void, with a
warning and ``dpstream_commits_lost_total``, where Faust's crashes the consumer and with it the
worker: Faust lets a ``CommitFailedError`` pass, but not the ``IllegalStateError`` aiokafka
raises when the rebalance took the partitions away between Faust's check of its assignment
and the commit ("No partitions assigned", "Partition ... is not assigned").

The override touches one private attribute of aiokafka's consumer (``_fetch_max_wait_ms``,
read when the consumer starts), so the faust-streaming pin in ``pyproject.toml`` guards it;
``tests/stream/test_agent_transport.py`` fails if a new version moves it.
"""

from __future__ import annotations

from collections.abc import Mapping
from time import monotonic
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import faust

FETCH_WAIT_MS = 50
"""The longest the release agent's consumer waits for a fetch to bring something."""


def app(*args: Any, **kwargs: Any) -> faust.App:
    """A :class:`faust.App` (same arguments) whose consumer waits :data:`FETCH_WAIT_MS`."""
    import faust
    from faust.transport.drivers import aiokafka as driver

    class Thread(driver.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = FETCH_WAIT_MS
            return consumer

        async def _commit(self, offsets: Mapping[Any, int]) -> bool:
            return await commit(self, offsets)

    class Consumer(driver.Consumer):
        def _new_consumer_thread(self) -> Any:
            return Thread(self, loop=self.loop, beacon=self.beacon)

    class Transport(driver.Transport):
        pass

    Transport.Consumer = Consumer

    class App(faust.App):
        def _new_transport(self) -> Any:
            return Transport(self.conf.broker_consumer, self)

    return App(*args, **kwargs)


async def commit(thread: Any, offsets: Mapping[Any, int]) -> bool:
    """Commit ``offsets`` (Faust ``TP`` -> offset) through a Faust consumer thread, as Faust's
    ``AIOKafkaConsumerThread._commit`` does, but an offset commit that a rebalance made void is
    given up (:func:`~app.stream.kafka.abandon_commit`) instead of crashing the consumer: the
    release agent is at least once and its protocol makes a replayed partial harmless. Any
    other failure still crashes it. Whether the commit landed."""
    from aiokafka.structs import OffsetAndMetadata, TopicPartition

    from app.stream.kafka import abandon_commit, commit_lost_to_rebalance

    assigned = thread.assignment()
    mine = {tp: offset for tp, offset in offsets.items() if tp in assigned}
    thread.tp_last_committed_at.update(dict.fromkeys(mine, monotonic()))
    try:
        await thread._ensure_consumer().commit(
            {
                TopicPartition(tp.topic, tp.partition): OffsetAndMetadata(o, "")
                for tp, o in mine.items()
            }
        )
    except Exception as exc:
        if commit_lost_to_rebalance(exc):
            abandon_commit("release", exc)
        else:
            thread.log.exception("commit failed: %r; assignment %r", exc, assigned)
            await thread.crash(exc)
        return False
    return True
