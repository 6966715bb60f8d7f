"""The worker's operator HTTP surface: ``/metrics``, ``/healthz`` and ``/readyz`` on one port.

It is its own small aiohttp service, started before the Faust app, so ``/healthz`` answers
while tables recover; ``/readyz`` answers 200 only once the ingest service consumes its
partitions (caught up) and the release agent runs. ``/metrics`` serves
:data:`app.metrics.REGISTRY`: budgets, timings and rejected messages, never a count of the
data; the exact counts of :data:`app.metrics.DATA_REGISTRY` only with the operator's opt-in
(``DPSTREAM_EXPOSE_DATA_COUNTS=true``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from mode import Service
from prometheus_client import generate_latest

from app.metrics import DATA_REGISTRY, DEAD_LETTERS, READY, REGISTRY
from app.stream.records import REASONS

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4"


class HttpService(Service):
    """Serve the operator endpoints on ``bind:port``; ``ready()`` decides ``/readyz``."""

    def __init__(
        self,
        bind: str,
        port: int,
        ready: Callable[[], bool],
        expose_data: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.bind, self.port, self.ready, self.expose_data = bind, port, ready, expose_data
        self._runner: web.AppRunner | None = None
        for reason in REASONS:
            DEAD_LETTERS.labels(reason)  # every reason has a series from the start

    async def _metrics(self, request: web.Request) -> web.Response:
        READY.set(1 if self.ready() else 0)
        body = generate_latest(REGISTRY)
        if self.expose_data:  # the operator's explicit opt-in: exact counts about the data
            body += generate_latest(DATA_REGISTRY)
        return web.Response(body=body, content_type=CONTENT_TYPE)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        ready = self.ready()
        READY.set(1 if ready else 0)
        if ready:
            return web.Response(text="ready\n")
        return web.Response(text="starting\n", status=503)

    async def on_start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.bind, self.port).start()
        log.info(
            "http listening bind=%s port=%d paths=/metrics,/healthz,/readyz", self.bind, self.port
        )

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
