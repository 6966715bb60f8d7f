"""The worker's operator HTTP surface: ``/metrics``, ``/healthz`` and ``/readyz`` on one port.

It is its own small aiohttp service, started before the Faust app, so ``/healthz`` answers
while tables recover; ``/readyz`` answers 200 only once the ingest service consumes its
partitions (caught up) and the release agent runs. ``/metrics`` serves
:data:`app.metrics.REGISTRY` only: budgets, outcomes and timings, never true counts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from mode import Service
from prometheus_client import generate_latest

from app.metrics import REGISTRY

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4"


class HttpService(Service):
    """Serve the operator endpoints on ``bind:port``; ``ready()`` decides ``/readyz``."""

    def __init__(self, bind: str, port: int, ready: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bind, self.port, self.ready = bind, port, ready
        self._runner: web.AppRunner | None = None

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), content_type=CONTENT_TYPE)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.ready():
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
