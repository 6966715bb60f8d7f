"""``app.stream.ops.http.HttpService``: its own thread and loop serve HTTP, while the loop
watch measures the worker's *main* loop, and a stop leaves nothing behind.

(The service used to keep its thread's loop in ``_loop``, mode's own attribute: its watch task
then ran on the HTTP loop, so a saturated main loop never showed, and every stop logged
"Event loop is closed".)
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request

from app.stream.broker import free_port
from app.stream.ops.health import SATURATED_S
from app.stream.ops.http import HttpService
from app.stream.ops.status import StatusBoard


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_the_loop_watch_sees_the_main_loop_blocked_and_readyz_still_answers():
    port = free_port()

    async def go() -> tuple[float, float, tuple[int, str], bool]:
        svc = HttpService("127.0.0.1", port, lambda: "", StatusBoard())
        await svc.start()
        try:
            assert svc.loop is asyncio.get_running_loop()
            await asyncio.sleep(0.5)  # a few beats of the watch
            calm = svc.loop_watch.lag()
            # /readyz is asked from another thread while the main loop is held up, as under
            # overload: the HTTP thread answers it all the same, at once.
            asked: list[tuple[float, tuple[int, str]]] = []

            def ask() -> None:
                t0 = time.monotonic()
                asked.append((0.0, get(port, "/readyz")))
                asked[0] = (time.monotonic() - t0, asked[0][1])

            thread = threading.Thread(target=ask)
            thread.start()
            time.sleep(SATURATED_S + 0.5)
            thread.join()
            took, answer = asked[0]
            assert took < 1.0
            await asyncio.sleep(0.3)  # the watch's next beat, late
            blocked = svc.loop_watch.lag()
        finally:
            await svc.stop()
        return calm, blocked, answer, svc._thread is not None and svc._thread.is_alive()

    calm, blocked, answer, alive = asyncio.run(go())
    assert calm < 0.5
    assert blocked >= SATURATED_S
    assert answer == (200, "ready\n")
    assert not alive  # the HTTP thread ended with the stop
