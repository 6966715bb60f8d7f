"""The worker's operator HTTP surface: ``/metrics``, ``/healthz``, ``/readyz``, and the status
page ``/`` and budget view ``/budget`` (:mod:`app.stream.status`) on one port.

It is its own small aiohttp service, started before the Faust app, so ``/healthz`` answers
while tables recover. ``/readyz`` answers 200 only while nothing is wrong: the collect
services consume their partitions (caught up, fetches coming), the release agent runs and
serves every stream, no release is overdue; otherwise 503 with the reasons, one per line
(``dpstream_ready`` follows it). ``/metrics`` serves :data:`app.metrics.REGISTRY`: budgets,
progress, timings and rejected messages, never a count of the data; the exact counts of
:data:`app.metrics.DATA_REGISTRY` only with the operator's opt-in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from mode import Service
from prometheus_client import generate_latest

from app.metrics import DATA_REGISTRY, DEAD_LETTERS, READY, REGISTRY
from app.stream import status
from app.stream.records import REASONS

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4"


class HttpService(Service):
    """Serve the operator endpoints on ``bind:port``; ``not_ready()`` ("" when ready) decides
    ``/readyz``."""

    def __init__(
        self,
        bind: str,
        port: int,
        not_ready: Callable[[], str],
        expose_data: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.bind, self.port, self.not_ready, self.expose_data = bind, port, not_ready, expose_data
        self._runner: web.AppRunner | None = None
        for reason in REASONS:
            DEAD_LETTERS.labels(reason)  # every reason has a series from the start

    async def _metrics(self, request: web.Request) -> web.Response:
        READY.set(0 if self.not_ready() else 1)
        body = generate_latest(REGISTRY)
        if self.expose_data:
            body += generate_latest(DATA_REGISTRY)
        return web.Response(body=body, content_type=CONTENT_TYPE)

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        reasons = self.not_ready()
        READY.set(0 if reasons else 1)
        if not reasons:
            return web.Response(text="ready\n")
        return web.Response(text=reasons.replace("; ", "\n") + "\n", status=503)

    async def on_start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/", status.page)
        app.router.add_get("/budget", status.budget)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.bind, self.port).start()
        log.info(
            "http listening bind=%s port=%d paths=/metrics,/healthz,/readyz,/,/budget",
            self.bind,
            self.port,
        )

    async def on_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
