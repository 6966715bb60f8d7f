"""The configuration's types: a secret, a requirement level, a stream, the Kafka security, the
worker's settings. Built by :mod:`app.stream.config.streams` (the YAML file) and
:mod:`app.stream.config.environment` (the environment); frozen once built."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.dp.interfaces import RoundDriven, as_round
from app.dp.mechanism import Mechanism
from app.dp.open import Level as OpenLevel
from app.dp.open import OpenMechanism, OpenPBA, OpenUniform
from app.dp.open.base import MAX_RELEASED_KEYS
from app.dp.registry import get
from app.dp.types import Group
from app.dp.units import UnitBound
from app.stream.config.graph import StreamGraph
from app.stream.errors import ConfigError
from app.stream.slots import SlotClock

DEFAULT_STREAMS = Path(__file__).parents[1] / "default_streams.yaml"
NEIGHBOURS = ("replace", "add-remove")
"""The neighbouring relations a stream may protect (see :attr:`StreamConfig.neighbours`)."""
DOMAINS = ("labels", "open")
"""A stream's domain: listed labels (``labels`` / ``d``), or ``open`` (any key, issue 36)."""
OPEN_MECHANISMS: dict[str, type[OpenMechanism]] = {c.name: c for c in (OpenUniform, OpenPBA)}
"""The mechanisms an open-domain stream may name (:mod:`app.dp.open`, not in the registry)."""


class Secret:
    """A secret value that does not show in ``repr``, ``str`` or logs; :meth:`reveal` it.

    >>> s = Secret(b"k" * 16)
    >>> s, str(s), s.reveal()[:2]
    (Secret('***'), '***', b'kk')
    """

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        """The secret itself: pass it straight to the client that needs it."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


DEPLOYMENT_REQUIRED = (
    "DPSTREAM_DEPLOYMENT (or DPSTREAM_DEPLOYMENT_FILE) must name this deployment, non-empty "
    "and unique, whenever a noise key is set: two deployments sharing a key and a name draw "
    "the same noise"
)
"""The one line refusing a noise key without a deployment identity (docs/security.md)."""

DEFAULT_POPULATION = 1000
"""Users assumed at a level whose ``population`` is not configured (OBS input only)."""


@dataclass(frozen=True)
class Level:
    """A requirement level users may choose: ``eps``-DP over any ``w`` consecutive slots."""

    name: str
    w: int
    eps: float
    population: int = DEFAULT_POPULATION
    delta: float = 0.0
    """Open-domain streams: the window's delta besides ``eps`` (``(eps, delta)``-DP over any
    ``w`` slots, at most :data:`app.dp.open.MAX_DELTA`); 0 for a labels stream."""

    @property
    def group(self) -> Group:
        return Group(self.w, self.eps)

    def satisfies(self, other: Level) -> bool:
        """Whether a user at this level is protected at least as ``other`` promises: a window
        of ``other.w`` slots lies inside one of ``self.w`` slots, which spends <= ``self.eps``."""
        return self.w >= other.w and self.eps <= other.eps


@dataclass(frozen=True)
class StreamConfig:
    """One configured release: domain, slotting, clock, mechanism and requirement levels."""

    id: str
    labels: tuple[str, ...]
    slot_s: float
    grace_s: float
    clock: str
    release_timeout_s: float
    mechanism: str
    noise: str
    params: Mapping[str, Any]
    levels: tuple[Level, ...]
    default_level: int
    mode: str = "central"
    round_s: float = 0.0
    """Local mode: how long devices have to answer one collection request."""
    neighbours: str = "replace"
    """Central mode: what one user's privacy covers. ``replace``: any change of the user's
    value in any slot of a window (sensitivity 2); ``add-remove``: the presence or absence of
    the user's value (sensitivity 1; the papers' relation). Local mode always protects values."""
    max_delay_s: float = 60.0
    """How long past its due time a slot waits for partitions that are alive but behind."""
    max_values: int = 1
    """Central mode: distinct values a user may add per slot (the (w,n) papers' ``l``); the
    collect stage keeps the first ``max_values`` and counts the rest ``clipped``."""
    graph: StreamGraph | None = None
    """(w,n) mechanisms: the public graph over the labels and ``n``, built once at load."""
    alpha: float | None = None
    """Sum streams (``sum: {alpha: ...}``): events carry an ``amount`` and the stream releases,
    per category, the sum of the users' amounts, each user's clipped to ``alpha`` per value and
    slot (the (w, alpha) model); ``None``: the stream counts users."""
    accept_weaker_guarantee: bool = False
    """The stream's explicit consent to a setting that is not DP as implemented at its levels
    (``noise: laplace``, a period mechanism's ``strict: false`` or ``feature_sensitivity:
    paper``, PLDP's ``split_rule: paper_ceil_z``); without it such a stream is refused."""
    weaker_guarantee: str | None = None
    """Set at load: why the stream is not w-event private as implemented (accepted through
    :attr:`accept_weaker_guarantee`), shown in every release and audit record, ``/budget``
    and the status page; None when it is."""
    unit: UnitBound | None = None
    """Set at load: the privacy unit the stream belongs to, with what one user can lose across
    the unit's streams in its interval (:mod:`app.stream.config.units`)."""
    users: int = 0
    """Set at load: local mode's registered users (indices ``0 .. users - 1``), as the stream's
    mechanism states them (:attr:`app.dp.interfaces.RoundDriven.users`); 0 for central
    streams."""
    domain: str = "labels"
    """``labels`` (the listed :attr:`labels`), or ``open``: an event's value is any key, a
    non-empty string of at most :attr:`max_key_chars` characters, and :attr:`labels` is
    empty (:attr:`is_open`; docs/open-domain.md)."""
    max_keys: int = 1
    """Open streams: distinct keys a user contributes per slot (the collect stage keeps each
    user's ``max_keys`` keys of smallest keyed-hash score, :mod:`app.stream.collect.open_keys`)."""
    max_key_chars: int = 256
    """Open streams: the longest key; a longer one is dead-lettered ``key_too_long``."""
    retire_after: int = 16
    """Open streams: a public key retires after this many releases below the threshold."""
    max_released_keys: int = MAX_RELEASED_KEYS
    """Open streams: the most keys one release shows, public and new together (the largest
    released counts kept; :func:`app.dp.open.base.top_keys`); the worker refuses a cap whose
    largest slot does not fit a message (:func:`app.stream.release.open.check_sizes`)."""

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the worker logs as warnings at start: an accepted weaker guarantee."""
        if self.weaker_guarantee:
            return (f"not w-event private, accepted: {self.weaker_guarantee}",)
        return ()

    @property
    def local(self) -> bool:
        return self.mode == "local"

    @property
    def is_open(self) -> bool:
        """Whether the stream's domain is open (keys nobody listed, ``domain: open``)."""
        return self.domain == "open"

    @functools.cached_property
    def slots(self) -> SlotClock:
        """The stream's slot clock (the one place slot arithmetic lives)."""
        return SlotClock(self.slot_s, 0.0 if self.local else self.grace_s)

    @property
    def sensitivity(self) -> int:
        """L1 change of one slot's histogram by one user under :attr:`neighbours`: the user's
        ``max_values`` counts (an open stream's ``max_keys``) added or removed, or
        (``replace``) moved to other cells. A sum stream's mechanism multiplies it by
        :attr:`alpha` (``Delta = alpha * sensitivity``)."""
        per_user = self.max_keys if self.is_open else self.max_values
        return per_user * (2 if self.neighbours == "replace" else 1)

    @property
    def sums(self) -> bool:
        """Whether the stream sums amounts (``alpha`` set) instead of counting users."""
        return self.alpha is not None

    @property
    def d(self) -> int:
        return len(self.labels)

    @property
    def groups(self) -> tuple[Group, ...]:
        return tuple(level.group for level in self.levels)

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(level.name for level in self.levels)

    @functools.cached_property
    def level_widths(self) -> tuple[int, ...]:
        """Every level's window ``w`` (the gap rule's, :mod:`app.dp.levels`)."""
        return tuple(level.w for level in self.levels)

    def slot_of(self, at: float) -> int:
        """The slot of time ``at`` on the stream's clock (:class:`~app.dp.levels.LevelRule`)."""
        return self.slots.slot_of(at)

    def build_mechanism(self) -> Mechanism:
        """A fresh mechanism for this stream, built through the registry (an open stream's:
        :meth:`build_open`)."""
        if self.is_open:
            return self.build_open()
        params = dict(self.params)
        if not self.local:
            params.update(noise=self.noise, sensitivity=self.sensitivity)
        if self.graph is not None:
            params.update(graph=self.graph.graph, n=self.graph.n)
        if self.alpha is not None:
            params.update(alpha=self.alpha)
        return get(self.mechanism).for_stream(self.d, self.groups, **params)

    def build_open(self) -> OpenMechanism:
        """A fresh mechanism of a ``domain: open`` stream (:data:`OPEN_MECHANISMS`): its levels
        ``(w, eps, delta)``, the population of all levels together, ``max_keys``, the
        neighbouring relation (``replace``: each kept key moves on both sides, sensitivity 2),
        ``retire_after``, ``max_key_chars`` and the mechanism's own ``params``."""
        return OPEN_MECHANISMS[self.mechanism](
            levels=[OpenLevel(lv.w, lv.eps, lv.delta) for lv in self.levels],
            population=sum(lv.population for lv in self.levels),
            max_keys=self.max_keys,
            sensitivity=2 if self.neighbours == "replace" else 1,
            retire_after=self.retire_after,
            max_key_chars=self.max_key_chars,
            max_released_keys=self.max_released_keys,
            **self.params,
        )

    @property
    def period(self) -> bool:
        """Whether the stream's mechanism releases whole periods (:mod:`app.dp.period`): the
        central driver then steps it as :class:`~app.dp.interfaces.PeriodStepped`, else as
        :class:`~app.dp.interfaces.SlotStepped`."""
        return not self.local and not self.is_open and get(self.mechanism).kind == "period"

    def build_local(self) -> RoundDriven:
        """A fresh mechanism of a ``mode: local`` stream, as the local driver drives it."""
        return as_round(self.build_mechanism())

    def level_index(self, name: str) -> int | None:
        """Index of the level called ``name``, or ``None`` if the stream does not offer it."""
        for i, level in enumerate(self.levels):
            if level.name == name:
                return i
        return None


@dataclass(frozen=True)
class KafkaSecurity:
    """How the Kafka clients authenticate (``DPSTREAM_KAFKA_*``)."""

    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    ssl_cafile: str | None = None


@dataclass(frozen=True)
class Settings:
    """Everything the worker needs, built once by ``load_settings`` and passed down."""

    broker: str | None
    state_dir: Path
    metrics_port: int
    metrics_bind: str
    noise_key: Secret | None
    security: KafkaSecurity
    log_level: str
    topic_prefix: str
    session_timeout_s: float
    streams: tuple[StreamConfig, ...]
    config_path: Path = field(default=DEFAULT_STREAMS)
    deployment: str = ""
    """The deployment's identity, mixed into every noise derivation and written in every audit
    record (``DPSTREAM_DEPLOYMENT`` or ``DPSTREAM_DEPLOYMENT_FILE``): two deployments sharing a
    key and a stream id draw independent noise. Required, non-empty, whenever a noise key is
    configured; there is no default that two deployments could share."""
    delivery_horizon_s: float = 10.0
    """How long producers may still deliver what they buffered through a broker outage once
    the broker is back (``DPSTREAM_DELIVERY_HORIZON_S``, 1-600 s): after a gap in fetch
    responses, the collect stages hold every partition's progress this long, whatever the
    streams' ``grace_s`` (:mod:`app.stream.collect.events`)."""
    expose_data_counts: bool = False
    """Operator opt-in (``DPSTREAM_EXPOSE_DATA_COUNTS``): export exact event and report
    counts by outcome on ``/metrics``. Off by default: they are data, not a mechanism's output."""

    def stream(self, stream_id: str) -> StreamConfig:
        for s in self.streams:
            if s.id == stream_id:
                return s
        raise ConfigError(f"no stream {stream_id!r} in {self.config_path}")

    def require_noise_key(self) -> bytes:
        """The noise key, or a :class:`ConfigError` saying how to provide one."""
        if self.noise_key is None:
            raise ConfigError(
                "no noise key: set DPSTREAM_NOISE_KEY (hex or base64, >= 16 bytes) "
                "or DPSTREAM_NOISE_KEY_FILE"
            )
        if not self.deployment:
            raise ConfigError(DEPLOYMENT_REQUIRED)
        return self.noise_key.reveal()
