"""STAND-IN for the dpstream worker's HTTP surface, used by tests/deploy only.

It is not the worker: it serves ``app.metrics.REGISTRY`` at ``/metrics`` (with ``/healthz`` and
``/readyz``) on 127.0.0.1 through prometheus_client, after setting a few series a running
worker would have. It lets the deployment tests point a real Prometheus at dpstream's real
metric definitions without a Kafka broker. Run: ``python -m tests.deploy.standin_worker PORT``.

The series it sets: stream ``standin`` with 10 s slots whose last release was 300 s ago (so the
DpstreamNoRelease expression is true), two requirement groups, one dead letter.
"""

from __future__ import annotations

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from app import metrics

STREAM = "standin"
SLOT_S = 10.0
STALE_S = 300.0


def populate() -> None:
    """Series for one central stream, as a worker that released and then stalled would have."""
    now = time.time()
    metrics.SLOT_SECONDS.labels(STREAM).set(SLOT_S)
    metrics.LAST_RELEASE_TIMESTAMP.labels(STREAM).set(now - STALE_S)
    metrics.LAST_RELEASED_SLOT.labels(STREAM).set(41)
    for group, (eps, spent) in enumerate([(0.5, 0.5), (1.0, 0.25)]):
        g = str(group)
        metrics.GROUP_EPSILON.labels(STREAM, g).set(eps)
        metrics.WINDOW_BUDGET_SPENT.labels(STREAM, g).set(spent)
        metrics.WINDOW_BUDGET_FRACTION.labels(STREAM, g).set(spent / eps)
        metrics.EPSILON_SPENT.labels(STREAM, g).inc(spent)
    metrics.EVENTS.labels(STREAM, "accepted").inc(100)
    metrics.RELEASES.labels(STREAM, "fresh").inc(3)
    metrics.RELEASES.labels(STREAM, "approximated").inc(1)
    metrics.DEAD_LETTERS.labels("undecodable").inc()
    metrics.SLOT_CLOSE_LAG.labels(STREAM).observe(0.2)
    metrics.RELEASE_LATENCY.labels(STREAM).observe(0.4)
    metrics.STEP_SECONDS.labels(STREAM, "pba").observe(0.001)
    metrics.CONSUMER_LAG.labels("events").set(0)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/metrics"):
            body, ctype = generate_latest(metrics.REGISTRY), CONTENT_TYPE_LATEST
        elif self.path in ("/healthz", "/readyz"):
            body, ctype = b"ok\n", "text/plain"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str]) -> int:
    populate()
    server = ThreadingHTTPServer(("127.0.0.1", int(argv[1]) if len(argv) > 1 else 0), Handler)
    print(server.server_address[1], flush=True)  # the port, for the test that started us
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
