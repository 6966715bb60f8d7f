"""The release agent's Kafka consumer, with a short fetch wait.

Faust builds its consumer with ``fetch_max_wait_ms=1500`` written in the driver, not a setting.
A broker that answers an empty fetch only at the end of that wait (Tansu does) then delays a
partial by up to 1.5 s before the release agent sees it, and that is most of a release's
latency. :func:`app` makes the worker's Faust app with a transport whose consumer waits at
most :data:`FETCH_WAIT_MS`: the agent then hears partials within 50 ms, at the
cost of more (empty) fetch requests while the topic is quiet.

The override touches one private attribute of aiokafka's consumer (``_fetch_max_wait_ms``,
read when the consumer starts), so the faust-streaming pin in ``pyproject.toml`` guards it;
``tests/stream/test_agent_transport.py`` fails if a new version moves it.
"""

from __future__ import annotations

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
