"""The worker's operator HTTP surface: ``/metrics``, ``/healthz``, ``/readyz``, and the status
page ``/`` and budget view ``/budget`` (:mod:`app.stream.ops.status`) on one port.

It is its own small aiohttp server, started before the Faust app, so ``/healthz`` answers while
tables recover, and it runs on an event loop in a thread of its own, so ``/readyz`` and
``/metrics`` answer within a second even while the worker's loop is saturated (the handlers
only read state). The service also runs the loop watch and the broker probe of
:mod:`app.stream.ops.health` that readiness uses. ``/readyz`` answers 200 only while nothing is
wrong: the collect services consume their partitions (caught up, fetches coming), the release
agent runs and serves every stream, no stream's release lag is past its bound; otherwise 503
with the reasons, one per line (``dpstream_ready`` follows it). ``/metrics`` serves
:data:`app.metrics.REGISTRY`: budgets, progress, timings and rejected messages, never a count
of the data; the exact counts of :data:`app.metrics.DATA_REGISTRY` only with the operator's
opt-in.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web
from mode import Service
from prometheus_client import generate_latest

from app.metrics import DATA_REGISTRY, DEAD_LETTERS, EVENT_LOOP_LAG_SECONDS, READY, REGISTRY
from app.stream.ops.health import BrokerProbe, LoopWatch
from app.stream.ops.status import StatusBoard
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
        board: StatusBoard,
        expose_data: bool = False,
        loop_watch: LoopWatch | None = None,
        probe: BrokerProbe | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.bind, self.port, self.not_ready, self.expose_data = bind, port, not_ready, expose_data
        self.board = board
        self.loop_watch = loop_watch or LoopWatch()
        self.probe = probe
        self._thread: threading.Thread | None = None
        self._http_loop: asyncio.AbstractEventLoop | None = None
        """The HTTP thread's own loop (not ``_loop``: that is mode's, the worker's main loop,
        on which :meth:`_watch_loop` measures saturation)."""
        self._up = threading.Event()
        self._error: BaseException | None = None
        for reason in REASONS:
            DEAD_LETTERS.labels(reason)  # every reason has a series from the start

    async def _metrics(self, request: web.Request) -> web.Response:
        READY.set(0 if self.not_ready() else 1)
        EVENT_LOOP_LAG_SECONDS.set(self.loop_watch.lag())
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

    def _app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/", self.board.page)
        app.router.add_get("/budget", self.board.budget)
        return app

    def _serve(self) -> None:
        """The HTTP thread: its own event loop, serving until :meth:`on_stop` stops it."""
        loop = self._http_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        runner = web.AppRunner(self._app(), access_log=None)
        try:
            loop.run_until_complete(runner.setup())
            loop.run_until_complete(web.TCPSite(runner, self.bind, self.port).start())
        except BaseException as exc:  # noqa: BLE001 - reported by on_start
            self._error = exc
            self._up.set()
            loop.close()
            return
        self._up.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(runner.cleanup())
            loop.close()

    async def on_start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="http", daemon=True)
        self._thread.start()
        await asyncio.get_running_loop().run_in_executor(None, self._up.wait, 30.0)
        if self._error is not None:
            raise self._error
        if self.probe is not None:
            self.probe.start()
        log.info(
            "http listening bind=%s port=%d paths=/metrics,/healthz,/readyz,/,/budget",
            self.bind,
            self.port,
        )

    @Service.task
    async def _watch_loop(self) -> None:
        await self.loop_watch.run(asyncio.sleep)

    async def on_stop(self) -> None:
        if self.probe is not None:
            self.probe.stop()
        loop, thread = self._http_loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.get_running_loop().run_in_executor(None, thread.join, 10.0)
