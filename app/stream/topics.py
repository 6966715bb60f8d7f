"""Topic specs as data: the one place topic names, partitions, configs and schemas come from.

Each file ``topics/<role>.yaml`` describes one topic (``name``, ``partitions``,
``replication_factor``, ``config``, ``key``, ``value.fields``). The code refers to topics by
role (the file's stem) through :class:`Topics`, which applies ``DPSTREAM_TOPIC_PREFIX``.
:func:`create_topics` applies the specs to a broker idempotently with the confluent-kafka
AdminClient; :func:`partition_problems` says which existing topics do not have the partition
count their spec declares (the worker is then not ready: ``levels`` and ``preferences`` are
co-partitioned with ``events``, so a topic with another count silently loses or misplaces
users' levels).

>>> t = load_topics(prefix="t1.")
>>> t.events, t.dead_letter, t.spec("releases").partitions
('t1.events', 't1.dead-letter', 1)
>>> sorted(t.spec("events").fields)
['amount', 'stream', 'ts', 'user', 'value']
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.stream.errors import TopicSpecError

log = logging.getLogger(__name__)

TOPICS_DIR = Path(__file__).resolve().parents[2] / "topics"
MAX_MESSAGE_BYTES = 1_000_000
"""The largest message the worker produces (its producer's ``max_request_size``, counted as
aiokafka counts a record: key, value and the record batch's overhead). Faust's own default,
set explicitly because open streams size their releases and ledger entries by it
(:func:`app.stream.release.open.check_sizes`); below the 1 MiB a Kafka broker takes by default
(``message.max.bytes``), so no topic needs a ``max.message.bytes`` of its own."""
REQUIRED_ROLES = (
    "events",
    "preferences",
    "releases",
    "audit",
    "dead-letter",
    "partials",
    "ledger-changelog",
    "slots-changelog",
)


@dataclass(frozen=True)
class TopicSpec:
    """One topic as its file describes it (``name`` without the deployment prefix)."""

    role: str
    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str]
    fields: dict[str, dict[str, Any]]
    internal: bool


def _parse(path: Path) -> TopicSpec:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise TopicSpecError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise TopicSpecError(f"{path}: expected a mapping")
    name, parts, rf = doc.get("name"), doc.get("partitions"), doc.get("replication_factor", 1)
    if not isinstance(name, str) or not name:
        raise TopicSpecError(f"{path}: `name` must be a non-empty string, got {name!r}")
    for key, val in (("partitions", parts), ("replication_factor", rf)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise TopicSpecError(f"{path}: `{key}` must be an int >= 1, got {val!r}")
    config = doc.get("config") or {}
    fields = (doc.get("value") or {}).get("fields")
    if not isinstance(config, dict) or not isinstance(fields, dict) or not fields:
        raise TopicSpecError(f"{path}: needs a `config` mapping and `value.fields`")
    return TopicSpec(
        role=path.stem,
        name=name,
        partitions=int(parts),  # type: ignore[arg-type]
        replication_factor=int(rf),
        config={str(k): str(v) for k, v in config.items()},
        fields=fields,
        internal=bool(doc.get("internal", False)),
    )


@dataclass(frozen=True)
class Topics:
    """The deployment's topics by role, with the prefix applied to every name."""

    prefix: str
    specs: tuple[TopicSpec, ...]

    def spec(self, role: str) -> TopicSpec:
        for s in self.specs:
            if s.role == role:
                return s
        raise TopicSpecError(f"no topic spec for role {role!r}")

    def name(self, role: str) -> str:
        return self.prefix + self.spec(role).name

    @property
    def events(self) -> str:
        return self.name("events")

    @property
    def preferences(self) -> str:
        return self.name("preferences")

    @property
    def releases(self) -> str:
        return self.name("releases")

    @property
    def audit(self) -> str:
        return self.name("audit")

    @property
    def dead_letter(self) -> str:
        return self.name("dead-letter")

    @property
    def levels(self) -> str:
        return self.name("levels")

    @property
    def partials(self) -> str:
        return self.name("partials")

    @property
    def collection_requests(self) -> str:
        return self.name("collection-requests")

    @property
    def reports(self) -> str:
        return self.name("reports")


def load_topics(prefix: str = "", directory: Path | None = None) -> Topics:
    """Read every ``*.yaml`` under ``directory`` (``$DPSTREAM_TOPICS_DIR`` or ``topics/``)."""
    directory = directory or Path(os.environ.get("DPSTREAM_TOPICS_DIR") or TOPICS_DIR)
    specs = tuple(_parse(p) for p in sorted(directory.glob("*.yaml")))
    missing = set(REQUIRED_ROLES) - {s.role for s in specs}
    if missing:
        raise TopicSpecError(f"{directory}: missing topic specs for {sorted(missing)}")
    return Topics(prefix=prefix, specs=specs)


def partition_problems(topics: Topics, have: dict[str, int]) -> list[str]:
    """One line per topic of ``topics`` whose partition count on the broker (``have``: topic
    name -> count, topics not there are skipped) is not its spec's.

    >>> t = load_topics()
    >>> partition_problems(t, {"events": 4, "dpstream-levels": 2})
    ['topic dpstream-levels has 2 partitions, topics/levels.yaml declares 4']
    """
    out = []
    for spec in topics.specs:
        name = topics.prefix + spec.name
        if name in have and have[name] != spec.partitions:
            out.append(
                f"topic {name} has {have[name]} partitions, "
                f"topics/{spec.role}.yaml declares {spec.partitions}"
            )
    return out


def partition_counts(client_config: dict[str, Any], timeout_s: float = 30.0) -> dict[str, int]:
    """Every topic on the broker and its partition count."""
    from confluent_kafka.admin import AdminClient

    found = AdminClient(client_config).list_topics(timeout=timeout_s).topics
    return {name: len(meta.partitions) for name, meta in found.items()}


def create_topics(
    topics: Topics, client_config: dict[str, Any], timeout_s: float = 30.0
) -> dict[str, str]:
    """Create every topic that does not exist yet; return ``{name: "created" | "exists"}``.

    Existing topics are left as they are (a differing partition count is logged, not changed).
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient(client_config)
    existing = admin.list_topics(timeout=timeout_s).topics
    result: dict[str, str] = {}
    new: list[NewTopic] = []
    for spec in topics.specs:
        name = topics.prefix + spec.name
        if name in existing:
            have = len(existing[name].partitions)
            if have != spec.partitions:
                log.warning(
                    "topic exists with other partitions topic=%s have=%d spec=%d",
                    name,
                    have,
                    spec.partitions,
                )
            result[name] = "exists"
        else:
            new.append(NewTopic(name, spec.partitions, spec.replication_factor, config=spec.config))
    if new:
        for name, fut in admin.create_topics(new, request_timeout=timeout_s).items():
            try:
                fut.result(timeout_s)
                result[name] = "created"
            except KafkaException as exc:
                if exc.args and exc.args[0].code() == 36:  # TOPIC_ALREADY_EXISTS (a race)
                    result[name] = "exists"
                else:
                    raise
    return result
