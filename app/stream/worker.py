"""The Faust worker: the app, its RocksDB tables, the ``release`` agent, and the services.

One process runs three things on one event loop, stopped together on SIGTERM/SIGINT by
:class:`faust.Worker`:

- :class:`~app.stream.http.HttpService`: ``/metrics``, ``/healthz``, ``/readyz``;
- :class:`~app.stream.ingest.IngestService`: the collect stage, batch-consuming ``events``
  below Faust's per-event stream (the hot path) and sending per-slot partials (only when a
  central stream is configured);
- :class:`~app.stream.reports.ReportService`: the collect stage of ``mode: local`` streams,
  reading ``collection-requests`` and batch-consuming ``reports`` into per-round tallies (only
  when a local stream is configured);
- the Faust app: the ``release`` agent consuming ``partials`` (keyed by stream, so one
  partition serves a stream), with the tables ``ledger`` (stream -> mechanism state and the
  last release) and ``slots`` (stream -> open slots' merged counts), both
  ``store="rocksdb://"`` with changelog topics. The agent runs the slot release protocol of
  :mod:`app.stream.release.protocol`.

Faust settings forced by the brokers we test on (``ECOSYSTEM.md``): ``producer_max_batch_size=1``
(Tansu's high watermark bug would otherwise break table recovery), short session and rebalance
timeouts (``DPSTREAM_SESSION_TIMEOUT_S``), at-least-once processing (crash safety comes from
the ledger protocol, not from transactions).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import time
from collections.abc import Awaitable, Iterator, Mapping, MutableMapping
from typing import Any

from app import metrics
from app.stream.config import Settings
from app.stream.http import HttpService
from app.stream.ingest import IngestService
from app.stream.kafka import bootstrap, confluent_config, faust_credentials
from app.stream.local_levels import PreferenceReader
from app.stream.release import Releaser
from app.stream.reports import ReportService
from app.stream.topics import Topics, create_topics, load_topics

log = logging.getLogger(__name__)

APP_ID = "dpstream"


class BytesTable(MutableMapping[str, bytes]):
    """A Faust table of ``str -> bytes`` stored as base64 text (Faust's JSON codec needs text)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def __getitem__(self, key: str) -> bytes:
        value = self.table[key]
        if value is None:
            raise KeyError(key)
        return base64.b64decode(value)

    def __setitem__(self, key: str, value: bytes) -> None:
        self.table[key] = base64.b64encode(value).decode()

    def __delitem__(self, key: str) -> None:
        del self.table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


def build(settings: Settings, topics: Topics | None = None) -> tuple[Any, list[Any]]:
    """The Faust app and the services to run with it (``faust.Worker(app, *services)``)."""
    import faust

    topics = topics or load_topics(settings.topic_prefix)
    settings.require_noise_key()
    app_id = settings.topic_prefix + APP_ID
    partitions = topics.spec("partials").partitions
    app = faust.App(
        app_id,
        broker=f"kafka://{bootstrap(settings)}",
        broker_credentials=faust_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.state_dir / "faust"),
        topic_partitions=partitions,
        topic_replication_factor=topics.spec("partials").replication_factor,
        producer_max_batch_size=1,
        broker_session_timeout=settings.session_timeout_s,
        broker_rebalance_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(0.5, settings.session_timeout_s / 6),
        processing_guarantee="at_least_once",
        web_enabled=False,
        autodiscover=False,
    )
    partials = app.topic(
        topics.partials,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
        partitions=partitions,
    )
    tables = {
        name: BytesTable(
            app.Table(name, default=None, key_type=str, value_type=str, partitions=partitions)
        )
        for name in ("ledger", "slots")
    }

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        await app.producer.send_and_wait(topic, key, value, None, None, None)

    async def persist() -> None:
        await app.producer.flush()

    reader = PreferenceReader(settings, topics.preferences)
    releaser = Releaser(settings, topics, tables["ledger"], tables["slots"], produce, persist,
                        preferences=reader.read)  # fmt: skip

    def stop_reader(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> Awaitable[None]:
        return reader.stop()

    app.on_before_shutdown.connect(stop_reader)
    agent = {"running": False, "error": ""}

    @app.agent(partials, concurrency=1, name="release")
    async def release(stream: Any) -> None:
        agent["running"] = True
        try:
            async for event in stream.events():
                await releaser.on_message(event.value)
                agent["error"] = ""
        except Exception as exc:
            agent["running"], agent["error"] = False, f"release agent failed: {exc!r}"
            raise

    collectors: list[Any] = []
    central = tuple(s for s in settings.streams if not s.local)
    if central:
        collectors.append(
            IngestService(
                dataclasses.replace(settings, streams=central),
                topics,
                group_id=f"{app_id}-collect",
            )
        )
    if len(central) < len(settings.streams):
        collectors.append(ReportService(settings, topics, group_id=f"{app_id}-reports"))

    def not_ready() -> str:
        """Why the worker is not ready ("" when it is); see docs/service.md, Readiness."""
        reasons = [c.failed for c in collectors if c.failed]
        reasons += [f"{c.shortlabel}: broker unreachable" for c in collectors if not c.connected]
        reasons += [f"{c.shortlabel}: catching up" for c in collectors if not c.consuming]
        if not agent["running"]:
            reasons.append(agent["error"] or "release agent not running")
        if app.rebalancing:
            reasons.append("rebalancing")
        reasons += releaser.failed.values()
        reasons += releaser.guard.reasons(time.time())
        reasons += overdue(settings, time.time(), releaser.central.start_slot)
        return "; ".join(reasons)

    http = HttpService(settings.metrics_bind, settings.metrics_port, not_ready,
                       expose_data=settings.expose_data_counts)  # fmt: skip
    return app, [http, *collectors]


def overdue(
    settings: Settings, now: float, first: Mapping[str, int] | None = None
) -> list[str]:
    """Streams whose next release is past its deadline: the slot after the last one released
    (``dpstream_last_released_slot``), or, before any release by this process, the first slot
    the release agent chose (``first``, stream id -> slot)."""
    out = []
    for stream in settings.streams:
        last = metrics.LAST_RELEASED_SLOT.labels(stream.id)._value.get()
        if last:
            pending, what = int(last) + 1, f"no release since slot {int(last)}"
        elif first and stream.id in first:
            pending, what = first[stream.id], f"no release yet (first slot {first[stream.id]})"
        else:
            continue  # this process has not served the stream
        deadline = stream.slots.due(pending) + stream.release_timeout_s + stream.max_delay_s
        if now > deadline + stream.slot_s:
            out.append(f"stream {stream.id}: {what}")
    return out


def ensure_topics(settings: Settings, topics: Topics) -> None:
    """Create missing topics (idempotent) and log what was done."""
    for name, what in create_topics(topics, confluent_config(settings)).items():
        log.info("topic name=%s status=%s", name, what)


def run(settings: Settings) -> int:
    """Run the worker until SIGTERM/SIGINT; the exit code of :class:`faust.Worker`."""
    import faust

    topics = load_topics(settings.topic_prefix)
    (settings.state_dir / "faust").mkdir(parents=True, exist_ok=True)
    ensure_topics(settings, topics)
    app, services = build(settings, topics)
    worker = faust.Worker(
        app,
        *services,
        loglevel=settings.log_level.lower(),
        quiet=True,
        redirect_stdouts=False,
    )
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        return exit_code(exc.code, worker.crash_reason)
    return 0


def exit_code(code: object, reason: BaseException | None) -> int:
    """The worker's exit status once Faust stopped, from Faust's ``SystemExit`` code.

    Faust exits 1 when any service crashed, also when the only crash was an offset commit lost
    to a rebalance (a stop during a rebalance: "No partitions assigned", "Partition ... is not
    assigned", "group has already rebalanced"). Such a commit costs nothing here: processing is
    at least once and the release protocol makes a replayed record harmless, so a graceful stop
    that lost one exits 0, with a warning; any other crash keeps its status.
    """
    from aiokafka.errors import (
        CommitFailedError,
        IllegalGenerationError,
        IllegalStateError,
        RebalanceInProgressError,
        UnknownMemberIdError,
    )

    lost = (CommitFailedError, IllegalStateError, IllegalGenerationError,
            RebalanceInProgressError, UnknownMemberIdError)  # fmt: skip
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if status != 0 and isinstance(reason, lost):
        log.warning("stopped after an offset commit lost to a rebalance (%r); its records are "
                    "read again by the partition's next owner", reason)  # fmt: skip
        return 0
    return status
