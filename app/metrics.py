"""Every Prometheus metric dpstream exports, in one place (names prefixed ``dpstream_``).

Metrics are operator surfaces, readable by anyone who can scrape the pod: they carry budgets,
timings, progress and counts of rejected messages, and nothing exact about the data. Counts of
accepted, late or duplicate events and reports by outcome are data (differencing them against
the releases would undo the noise), so :data:`EVENTS` and :data:`REPORTS` live in a separate
registry that ``/metrics`` serves only when the operator opts in
(``DPSTREAM_EXPOSE_DATA_COUNTS=true``; off by default and in the chart). Late data shows
without them: :data:`LATE_SLOTS` counts, per stream, the slots in which any value was dropped
late (one bit per slot and worker, never how many values or users), and :data:`LATE_PARTIALS`
the partitions' partials whose values the release stage discarded. The open-domain streams'
contribution bound shows the same way: :data:`CLIPPED_SLOTS`, one bit per slot and worker. The
Grafana dashboard and the alert rules query only names defined here; ``tests/deploy`` checks
that.

Label conventions: ``stream`` is the stream id; ``level`` is the requirement level's name.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)
DATA_REGISTRY = CollectorRegistry(auto_describe=True)
"""Exact counts about the data: served only with ``DPSTREAM_EXPOSE_DATA_COUNTS=true``."""

EVENTS = Counter(
    "dpstream_events",
    "Opt-in, exact: events consumed, by outcome (accepted, late, invalid, duplicate, "
    "level_change).",
    ["stream", "outcome"],
    registry=DATA_REGISTRY,
)
DEAD_LETTERS = Counter(
    "dpstream_dead_letters",
    "Messages routed to the dead-letter topic, by reason.",
    ["reason"],
    registry=REGISTRY,
)
RELEASES = Counter(
    "dpstream_releases",
    "Releases produced, by kind (fresh, approximated).",
    ["stream", "kind"],
    registry=REGISTRY,
)
LAST_RELEASED_SLOT = Gauge(
    "dpstream_last_released_slot",
    "Index of the last slot released for the stream.",
    ["stream"],
    registry=REGISTRY,
)
LAST_RELEASE_TIMESTAMP = Gauge(
    "dpstream_last_release_timestamp_seconds",
    "Unix time at which the stream's last release was produced.",
    ["stream"],
    registry=REGISTRY,
)
SLOT_SECONDS = Gauge(
    "dpstream_slot_seconds",
    "Configured slot length of the stream.",
    ["stream"],
    registry=REGISTRY,
)
WINDOW_BUDGET_SPENT = Gauge(
    "dpstream_window_budget_spent",
    "Budget the group spent in its current window of w slots (including the last slot).",
    ["stream", "level"],
    registry=REGISTRY,
)
WINDOW_BUDGET_FRACTION = Gauge(
    "dpstream_window_budget_fraction",
    "Budget spent in the group's current window as a fraction of its eps (1.0 = exhausted).",
    ["stream", "level"],
    registry=REGISTRY,
)
GROUP_EPSILON = Gauge(
    "dpstream_group_epsilon",
    "The group's eps per window of w slots.",
    ["stream", "level"],
    registry=REGISTRY,
)
EPSILON_SPENT = Counter(
    "dpstream_epsilon_spent",
    "Budget spent since the worker started, summed over slots, per group.",
    ["stream", "level"],
    registry=REGISTRY,
)
SLOT_CLOSE_LAG = Histogram(
    "dpstream_slot_close_lag_seconds",
    "Delay between a slot's end (plus grace) and the moment the worker closed it.",
    ["stream"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
RELEASE_LATENCY = Histogram(
    "dpstream_release_latency_seconds",
    "Delay between a slot's end and the production of its release (a period mechanism's "
    "slots wait for the period's end).",
    ["stream"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600, 86400),
    registry=REGISTRY,
)
STEP_SECONDS = Histogram(
    "dpstream_mechanism_step_seconds",
    "Time the mechanism took to release one slot.",
    ["stream", "mechanism"],
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1),
    registry=REGISTRY,
)
CONSUMER_LAG_SECONDS = Gauge(
    "dpstream_consumer_lag_seconds",
    "How far behind its input the worker is: wall time minus the oldest progress among its "
    "assigned partitions (0 when every partition is read to its end).",
    ["topic"],
    registry=REGISTRY,
)
WATERMARK = Gauge(
    "dpstream_watermark_seconds",
    "Unix time up to which every partition of the stream is known complete (as the release "
    "agent last heard).",
    ["stream"],
    registry=REGISTRY,
)
SLOT_TIMEOUTS = Counter(
    "dpstream_slot_timeouts",
    "Slots released before every partition had passed them (a partition silent for "
    "release_timeout_s, or behind for max_delay_s); data of those partitions is dropped late.",
    ["stream"],
    registry=REGISTRY,
)
LATE_PARTIALS = Counter(
    "dpstream_late_partials",
    "Partitions' slot partials whose values were discarded: they arrived after their slot was "
    "released and their values are not the ones the release holds (a replay of the released "
    "content, an empty partial or one older than the stream's start is not counted).",
    ["stream"],
    registry=REGISTRY,
)
CLIPPED_SLOTS = Counter(
    "dpstream_clipped_slots",
    "Slots of an open-domain stream in which this worker's contribution bound dropped a value "
    "(some user sent more than max_keys distinct keys); each slot counts once per worker. It "
    "says which slots were bounded, never how many values or users.",
    ["stream"],
    registry=REGISTRY,
)
LATE_SLOTS = Counter(
    "dpstream_late_slots",
    "Slots of the stream in which this worker dropped any value as late (at the collect stage "
    "or as a discarded partial); each slot counts once per worker. It says which slots lost "
    "data, never how many values or users.",
    ["stream"],
    registry=REGISTRY,
)
RELEASE_LAG_SLOTS = Gauge(
    "dpstream_release_lag_slots",
    "Slots that are due (end plus grace passed on the wall clock) and not closed yet by the "
    "release stage this worker runs (clock: wall streams only; 0 when on time).",
    ["stream"],
    registry=REGISTRY,
)
RELEASE_LAG_SECONDS = Gauge(
    "dpstream_release_lag_seconds",
    "Wall time since the oldest due slot that is not closed yet became due (0 when on time).",
    ["stream"],
    registry=REGISTRY,
)
EVENT_LOOP_LAG_SECONDS = Gauge(
    "dpstream_event_loop_lag_seconds",
    "The worst delay of the worker's event loop over the last few seconds: how late a 0.1 s "
    "timer ran (saturation: batches, decoding, a blocked call). Readiness says 'event loop "
    "saturated' above 1 s instead of blaming the broker.",
    registry=REGISTRY,
)
INTERNAL_REFUSED = Counter(
    "dpstream_internal_refused",
    "Internal records and state refused (stream: the stream, or levels, preferences, the "
    "table). Reasons: malformed, a partials message that does not decode or is out of range; "
    "partition, a partition the source topic does not have; future, progress or a slot beyond "
    "the wall clock plus the stream's allowed skew; shape, counts that do not fit the stream; "
    "capacity, more records claimed than the partition holds; state, a ledger or slots value "
    "that does not decode; changelog, a table changelog record refused on restore; history, a "
    "levels history the user's preferences could not have made. Any is a fault or an attack.",
    ["stream", "reason"],
    registry=REGISTRY,
)
MECHANISM_REFUSALS = Counter(
    "dpstream_mechanism_refusals",
    "Slots whose step a mechanism's own check refused (the population ledger refusing a round "
    "that would exceed a user's own window, PersonalWindowError): the local slot is closed "
    "without asking anyone more; a central stream is no longer served (readyz says why). The "
    "worker goes on. Any is a bug, or a setting accepted with accept_weaker_guarantee.",
    ["stream"],
    registry=REGISTRY,
)
COMMITS_LOST = Counter(
    "dpstream_commits_lost",
    "Offset commits a consumer abandoned because Kafka refused them (mostly a rebalance: the "
    "group moved on, the generation is stale). Nothing is lost: the records after the last "
    "commit are read again and a later commit goes further. A steady rate means commits never "
    "land and restarts replay more and more.",
    ["consumer", "reason"],
    registry=REGISTRY,
)
ASSIGNMENTS = Counter(
    "dpstream_assignments",
    "Partition assignments a consumer received from its group (one per rebalance it took "
    "part in; the first at start). A rise while the group's membership is steady means members "
    "time out: their partitions are replayed from the last commit meanwhile.",
    ["consumer"],
    registry=REGISTRY,
)
RECORDS_UNACCOUNTED = Counter(
    "dpstream_records_unaccounted",
    "Records a collect stage fetched without giving each exactly one outcome (reason: "
    "offset_gap, offsets the fetches skipped, read again; gap_taken, skipped offsets that did "
    "not come back within GAP_RETRY_S, lost; offset_repeat, offsets fetched twice, counted "
    "once; uncounted, records the collector neither counted nor refused, lost; not_assigned, a "
    "batch of a partition the collector does not hold, read again; position_moved, the "
    "consumer's position left the last record handed over, sought back). A rise of gap_taken "
    "or uncounted is a loss to report; no commit passes a record that was not handed over.",
    ["consumer", "reason"],
    registry=REGISTRY,
)
READY = Gauge(
    "dpstream_ready",
    "1 when the worker is ready (consuming, releasing on time, broker reachable), else 0.",
    registry=REGISTRY,
)
USERS_AVAILABLE = Gauge(
    "dpstream_users_available",
    "Local mode: registered users that may report (not used in their current window).",
    ["stream"],
    registry=REGISTRY,
)
USERS_USED = Gauge(
    "dpstream_users_used",
    "Local mode: users who reported within their current window.",
    ["stream"],
    registry=REGISTRY,
)
LEVEL_USERS = Gauge(
    "dpstream_level_users",
    "Local mode, personalized streams: users at each level in the current slot (public: the "
    'collection requests name every user\'s level); level="(changing)": users sitting out a '
    "change of level.",
    ["stream", "level"],
    registry=REGISTRY,
)
LEVEL_USERS_AVAILABLE = Gauge(
    "dpstream_level_users_available",
    "Local mode, personalized streams: users of each level that may report (not used in the "
    "mechanism's recycling window).",
    ["stream", "level"],
    registry=REGISTRY,
)
REPORTS = Counter(
    "dpstream_reports",
    "Opt-in, exact: local mode reports consumed, by outcome (accepted, not_asked, "
    "wrong_slot, window_used, invalid, late).",
    ["stream", "outcome"],
    registry=DATA_REGISTRY,
)
COHORT_SIZE = Gauge(
    "dpstream_cohort_size",
    "Local mode: users asked in the last collection request, by round.",
    ["stream", "round"],
    registry=REGISTRY,
)
ROUNDS = Counter(
    "dpstream_rounds",
    "Local mode: collection rounds run, by round (dissimilarity, publication).",
    ["stream", "round"],
    registry=REGISTRY,
)
