"""The release agent's consumer waits at most FETCH_WAIT_MS for a fetch (not Faust's 1.5 s)."""

from __future__ import annotations

import asyncio

from app.stream import agent_transport


async def _nothing(*args: object) -> None:
    return None


def test_the_agents_consumer_waits_50_ms():
    async def build() -> int:
        app = agent_transport.app(
            "t",
            broker="kafka://127.0.0.1:1",
            autodiscover=False,
            web_enabled=False,
            store="memory://",
        )
        transport = app.transport
        consumer = transport.create_consumer(
            callback=_nothing, on_partitions_revoked=_nothing, on_partitions_assigned=_nothing
        )
        client = consumer._thread._create_worker_consumer(transport)
        wait: int = client._fetch_max_wait_ms  # read by AIOKafkaConsumer.start()
        client._closed = True  # never started: nothing to close
        return wait

    assert asyncio.run(build()) == agent_transport.FETCH_WAIT_MS == 50
