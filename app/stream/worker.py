"""The Faust worker: the app, its RocksDB tables, the ``release`` agent, and the services.

One process runs three things on one event loop, stopped together on SIGTERM/SIGINT by
:class:`faust.Worker`:

- :class:`~app.stream.ops.http.HttpService`: ``/metrics``, ``/healthz``, ``/readyz``;
- :class:`~app.stream.collect.ingest.IngestService`: the collect stage, batch-consuming ``events``
  below Faust's per-event stream (the hot path) and sending per-slot partials (only when a
  central stream is configured);
- :class:`~app.stream.collect.reports.ReportService`: the collect stage of ``mode: local`` streams,
  reading ``collection-requests`` and batch-consuming ``reports`` into per-round tallies (only
  when a local stream is configured);
- the Faust app: the ``release`` agent consuming ``partials`` (keyed by stream, so one
  partition serves a stream), with the tables ``ledger`` (stream -> mechanism state and the
  last release) and ``slots`` (stream -> open slots' merged counts), both
  ``store="rocksdb://"`` with changelog topics. The agent runs the slot release protocol of
  :mod:`app.stream.release.protocol`.

The wings meet here: the operations wing (:mod:`app.stream.ops`) watches the others only through
what this module registers, :class:`~app.stream.ops.release_metrics.ReleaseMetrics` and the
status board as the release agent's listeners, and one
:class:`~app.stream.ops.late.LateSlots` as the late signal of the collect stages and of the
release metrics (so a slot that lost data counts once per worker).

Faust settings forced by the brokers we test on (``docs/ecosystem.md``):
``producer_max_batch_size=1`` (Tansu's high watermark bug would otherwise break table
recovery), short session and rebalance timeouts (``DPSTREAM_SESSION_TIMEOUT_S``), at-least-once
processing (crash safety comes from the ledger protocol, not from transactions).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from app import metrics
from app.stream import agent_transport
from app.stream.collect.ingest import IngestService
from app.stream.collect.reports import ReportService
from app.stream.config import Settings, StreamConfig
from app.stream.kafka import (
    bootstrap,
    commit_lost_to_rebalance,
    confluent_config,
    faust_credentials,
)
from app.stream.ops.health import SATURATED_S, BrokerProbe, LoopWatch
from app.stream.ops.http import HttpService
from app.stream.ops.late import LateSlots
from app.stream.ops.release_metrics import ReleaseMetrics
from app.stream.ops.status import StatusBoard
from app.stream.release import Releaser
from app.stream.release.capacity import EndOffsets
from app.stream.release.local_levels import PreferenceReader
from app.stream.slots import SlotClock
from app.stream.tables import BytesTable, ChangelogTable
from app.stream.topics import (
    MAX_MESSAGE_BYTES,
    Topics,
    create_topics,
    load_topics,
    partition_counts,
    partition_problems,
)

log = logging.getLogger(__name__)

APP_ID = "dpstream"


ROCKSDB_OPTIONS = {
    "write_buffer_size": 4 << 20,
    "max_write_buffer_number": 2,
    "target_file_size_base": 8 << 20,
    "block_cache_size": 8 << 20,
}
"""The release agent's RocksDB stores (one per table and partition). Faust's defaults, three
64 MiB memtables and a 2 GiB block cache each, let a steady worker's RSS climb for more than an
hour (a ledger write per slot fills a memtable slowly); these bound a store to ~16 MiB. Its
data is a few entries per stream: docs/capacity.md, Memory."""


def build(
    settings: Settings, topics: Topics | None = None, problems: Sequence[str] = ()
) -> tuple[Any, list[Any]]:
    """The Faust app and the services to run with it (``faust.Worker(app, *services)``);
    ``problems``: what :func:`check_topics` found (readiness stays red while there are any)."""

    topics = topics or load_topics(settings.topic_prefix)
    settings.require_noise_key()
    app_id = settings.topic_prefix + APP_ID
    partitions = topics.spec("partials").partitions
    app = agent_transport.app(
        app_id,
        broker=f"kafka://{bootstrap(settings)}",
        broker_credentials=faust_credentials(settings),
        store="rocksdb://",
        datadir=str(settings.state_dir / "faust"),
        topic_partitions=partitions,
        topic_replication_factor=topics.spec("partials").replication_factor,
        producer_max_batch_size=1,
        producer_max_request_size=MAX_MESSAGE_BYTES,
        broker_session_timeout=settings.session_timeout_s,
        broker_rebalance_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(0.5, settings.session_timeout_s / 6),
        processing_guarantee="at_least_once",
        web_enabled=False,
        autodiscover=False,
        Table=ChangelogTable,
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
            app.Table(
                name,
                default=None,
                key_type=str,
                value_type=str,
                partitions=partitions,
                options=dict(ROCKSDB_OPTIONS),  # Faust's store pops from it: one copy each
            ),
            name,
        )
        for name in ("ledger", "slots")
    }

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        await app.producer.send_and_wait(topic, key, value, None, None, None)

    async def persist() -> None:
        await app.producer.flush()

    reader = PreferenceReader(settings, topics.preferences)
    ends = EndOffsets(settings, topics)
    late = LateSlots()
    board = StatusBoard()
    releaser = Releaser(
        settings,
        topics,
        tables["ledger"],
        tables["slots"],
        produce,
        persist,
        preferences=reader.read,
        listeners=[ReleaseMetrics(late), board],  # ops watches the release stage
        end_offset=ends,
    )

    async def stop_reader(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await reader.stop()
        await ends.stop()

    def revoked(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        releaser.revoked()  # its streams' release lag is exported again once heard again

    app.on_before_shutdown.connect(stop_reader)
    app.on_partitions_revoked.connect(revoked)
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
                late=late,
                clipped=LateSlots(counter=metrics.CLIPPED_SLOTS),
            )
        )
    if len(central) < len(settings.streams):
        collectors.append(ReportService(settings, topics, group_id=f"{app_id}-reports", late=late))
    loop_watch = LoopWatch()
    probe = BrokerProbe(confluent_config(settings))

    def not_ready() -> str:
        """Why the worker is not ready ("" when it is); see docs/service.md, Readiness."""
        now = time.time()
        reasons = [*problems, *(c.failed for c in collectors if c.failed)]
        loop_lag = loop_watch.lag()
        if loop_lag > SATURATED_S:
            reasons.append(f"event loop saturated ({loop_lag:.1f} s behind)")
        # Stalled fetches while the broker answers the probe are saturation or a consumer
        # behind (its fetcher waits for the buffered records to be taken), not an outage.
        reachable = probe.reachable()
        reasons += [
            f"{c.shortlabel}: broker unreachable"
            for c in collectors
            if not c.connected and not reachable
        ]
        reasons += [f"{c.shortlabel}: catching up" for c in collectors if not c.consuming]
        if not agent["running"]:
            reasons.append(agent["error"] or "release agent not running")
        if app.rebalancing:
            reasons.append("rebalancing")
        reasons += list(releaser.failed.values())
        reasons += releaser.guard.reasons(now)
        reasons += releaser.reasons(now)
        reasons += lagging(
            settings, now, releaser.next_slots(), releaser.lag, releaser.publisher.next_slot
        )
        return "; ".join(reasons)

    http = HttpService(
        settings.metrics_bind,
        settings.metrics_port,
        not_ready,
        board,
        expose_data=settings.expose_data_counts,
        loop_watch=loop_watch,
        probe=probe,
    )
    return app, [http, *collectors]


def release_lag(slots: SlotClock, now: float, next_slot: int) -> tuple[int, float]:
    """How far a stream's releases are behind the wall clock when ``next_slot`` is the first
    slot not closed yet: the slots that are due (end plus grace passed) and not closed, and
    the seconds since the oldest of them became due; ``(0, 0.0)`` when on time.

    >>> c = SlotClock(slot_s=10.0, grace_s=1.0)  # slot 6 is 60-70 s, due at 71 s
    >>> release_lag(c, 70.5, 6), release_lag(c, 71.5, 6), release_lag(c, 95.0, 6)
    ((0, 0.0), (1, 0.5), (3, 24.0))
    """
    due = slots.due(next_slot)
    if now <= due:
        return 0, 0.0
    return slots.last_closable(now) - next_slot + 1, now - due


def lag_bound_s(stream: StreamConfig) -> float:
    """The largest release lag of a healthy worker: a slot may wait ``release_timeout_s`` for
    a silent partition (a rebalance after a crash), plus one slot of cadence."""
    return stream.release_timeout_s + stream.slot_s


Lag = Callable[[StreamConfig, int, float], tuple[int, float]]
"""``lag(stream, next_slot, now)``: :func:`release_lag` on the stream's own clock."""


def lagging(
    settings: Settings,
    now: float,
    next_slots: Mapping[str, int],
    lag: Lag | None = None,
    released: Mapping[str, int] | None = None,
) -> list[str]:
    """Export the release lag of the streams this worker's release agent serves
    (``next_slots``: stream id -> first slot not closed) and name those past
    :func:`lag_bound_s`, and those whose releases ran ahead of the wall clock.

    ``lag`` measures a stream's lag on its own clock (the central driver's: an event-time
    slot is due once some partition's progress passed it); without it ``clock: event``
    streams are skipped. ``released``: per stream, the ledger's next slot, whose previous
    slot was released: a central stream's must have been due at its stream's edge
    (:meth:`~app.stream.slots.SlotClock.edge`), or the stream released a slot before it ended
    (a local stream releases a slot when its rounds end, inside the slot).
    """
    out = []
    for stream in settings.streams:
        sid = stream.id
        if (stream.clock == "event" and lag is None) or sid not in next_slots:
            for gauge in (metrics.RELEASE_LAG_SLOTS, metrics.RELEASE_LAG_SECONDS):
                with contextlib.suppress(KeyError):
                    gauge.remove(sid)
            continue
        slots, seconds = (lag or _wall_lag)(stream, next_slots[sid], now)
        metrics.RELEASE_LAG_SLOTS.labels(sid).set(slots)
        metrics.RELEASE_LAG_SECONDS.labels(sid).set(seconds)
        bound = lag_bound_s(stream)
        if seconds > bound:
            clock = "the wall clock" if stream.clock == "wall" else "its event clock"
            out.append(
                f"stream {sid}: releases {seconds:.0f} s behind {clock} "
                f"({slots} slots due, bound {bound:g} s)"
            )
        last = (released or {}).get(sid)
        if last is None or stream.local:  # a local slot is released inside it, by design
            continue
        ahead = stream.slots.due(last - 1) - stream.slots.edge(now, stream.clock)
        if ahead > 0:
            out.append(
                f"stream {sid}: releases {ahead:.0f} s ahead of the wall clock "
                f"(slot {last - 1} released before it was due)"
            )
    return out


def _wall_lag(stream: StreamConfig, next_slot: int, now: float) -> tuple[int, float]:
    return release_lag(stream.slots, now, next_slot)


def ensure_topics(settings: Settings, topics: Topics) -> None:
    """Create missing topics (idempotent) and log what was done."""
    for name, what in create_topics(topics, confluent_config(settings)).items():
        log.info("topic name=%s status=%s", name, what)


def check_topics(settings: Settings, topics: Topics) -> list[str]:
    """The topics whose partition count is not their spec's, one logged line each (the worker
    runs, not ready: see :func:`~app.stream.topics.partition_problems`)."""
    problems = partition_problems(topics, partition_counts(confluent_config(settings)))
    for line in problems:
        log.error("%s: not ready until the topic is recreated with that count", line)
    return problems


def run(settings: Settings) -> int:
    """Run the worker until SIGTERM/SIGINT; the exit code of :class:`faust.Worker`."""
    import faust

    topics = load_topics(settings.topic_prefix)
    (settings.state_dir / "faust").mkdir(parents=True, exist_ok=True)
    ensure_topics(settings, topics)
    app, services = build(settings, topics, check_topics(settings, topics))
    worker = faust.Worker(
        app,
        *services,
        loglevel=settings.log_level.lower(),
        logging_config=logging_config(settings.log_level),
        quiet=True,
        redirect_stdouts=False,
    )
    try:
        worker.execute_from_commandline()
    except SystemExit as exc:
        return exit_code(exc.code, worker.crash_reason)
    return 0


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
"""One line per record, its time in UTC (:class:`app.utc.UTCFormatter`), as the CLI tools log."""


def logging_config(level: str) -> dict[str, Any]:
    """The worker's logging (``logging.config.dictConfig``): Faust's and ours, to stdout, in
    :data:`LOG_FORMAT` instead of mode's local-time default.

    >>> logging_config("INFO")["formatters"]["utc"]["fmt"] == LOG_FORMAT
    True
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"utc": {"()": "app.utc.UTCFormatter", "fmt": LOG_FORMAT}},
        "handlers": {
            "default": {
                "class": "logging.StreamHandler",
                "formatter": "utc",
                "stream": "ext://sys.stdout",
            }
        },
        "root": {"level": level.upper(), "handlers": ["default"]},
    }


def exit_code(code: object, reason: BaseException | None) -> int:
    """The worker's exit status once Faust stopped, from Faust's ``SystemExit`` code.

    Faust exits 1 when any service crashed, also when the only crash was an offset commit lost
    to a rebalance (a stop during a rebalance: "No partitions assigned", "Partition ... is not
    assigned", "group has already rebalanced"). The release agent's and the collect stages'
    commits give those up without a crash (``dpstream_commits_lost_total``), but Faust's own
    paths may still meet one. Such a commit costs nothing here: processing is at least once
    and the release protocol makes a replayed record harmless, so a graceful stop that lost
    one exits 0, with a warning; any other crash keeps its status.
    """
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if status != 0 and reason is not None and commit_lost_to_rebalance(reason):
        log.warning(
            "stopped after an offset commit lost to a rebalance (%r); its records are "
            "read again by the partition's next owner",
            reason,
        )
        return 0
    return status
