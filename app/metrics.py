"""Every Prometheus metric dpstream exports, in one place (names prefixed ``dpstream_``).

Metrics are operator surfaces: they carry budgets, counts of events by outcome, and timings,
never a true per-category count or a user's value (DESIGN, Security). The Grafana dashboard and
the alert rules query only names defined here; ``tests/deploy`` checks that.

Label conventions: ``stream`` is the stream id; ``group`` is the requirement level's index in the
stream's configuration (``0`` is the first level listed).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

EVENTS = Counter(
    "dpstream_events",
    "Events consumed, by outcome (accepted, late, invalid, duplicate, level_change).",
    ["stream", "outcome"],
    registry=REGISTRY,
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
    ["stream", "group"],
    registry=REGISTRY,
)
WINDOW_BUDGET_FRACTION = Gauge(
    "dpstream_window_budget_fraction",
    "Budget spent in the group's current window as a fraction of its eps (1.0 = exhausted).",
    ["stream", "group"],
    registry=REGISTRY,
)
GROUP_EPSILON = Gauge(
    "dpstream_group_epsilon",
    "The group's eps per window of w slots.",
    ["stream", "group"],
    registry=REGISTRY,
)
EPSILON_SPENT = Counter(
    "dpstream_epsilon_spent",
    "Budget spent since the worker started, summed over slots, per group.",
    ["stream", "group"],
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
    "Delay between a slot's end and the production of its release.",
    ["stream"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    registry=REGISTRY,
)
STEP_SECONDS = Histogram(
    "dpstream_mechanism_step_seconds",
    "Time the mechanism took to release one slot.",
    ["stream", "mechanism"],
    buckets=(0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1),
    registry=REGISTRY,
)
CONSUMER_LAG = Gauge(
    "dpstream_consumer_lag",
    "Messages between the worker's position and the end of its input partitions.",
    ["topic"],
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
REPORTS = Counter(
    "dpstream_reports",
    "Local mode: reports consumed, by outcome (accepted, not_asked, wrong_slot, "
    "window_used, invalid, late).",
    ["stream", "outcome"],
    registry=REGISTRY,
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
