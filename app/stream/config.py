"""The worker's configuration: one frozen, typed object built once from the environment and YAML.

Streams come from one YAML file (``DPSTREAM_CONFIG``; the demo's default is
``app/stream/default_streams.yaml``)::

    streams:
      - id: clicks                  # stream id: key of releases, ledgers and metrics
        labels: [home, news, ...]   # the domain; d = len(labels) (or give `d:` without labels)
        slot_s: 2.0                 # slot length in seconds
        grace_s: 0.5                # a slot closes at its end + grace
        clock: wall                 # wall (production) | event (replay: max event time seen)
        release_timeout_s: 1.0      # extra wait for partitions that did not report a slot
        mechanism: {name: pba, noise: laplace, params: {}}
        levels:                     # the requirement levels users may choose
          - {name: strict, w: 20, eps: 0.5, population: 9000}
          - {name: relaxed, w: 10, eps: 1.0, population: 1000}
        default_level: strict       # optional; default: the strictest (smallest eps / w)

Local mode (``mode: local``; devices perturb, the service only aggregates reports)::

      - id: app-usage
        mode: local                 # central (default) | local
        d: 16
        slot_s: 300
        round_s: 60                 # deadline of one collection round (at most 2 per slot)
        release_timeout_s: 5        # extra wait for reports partitions after a round's deadline
        mechanism:
          name: lpa                 # a local mechanism: lbu lsp lpu lbd lba lpd lpa plbu
          params: {users: 100000, oracle: grr}   # registered users (indices 0..users-1)
        levels:                     # exactly one level, except plbu (one per group, and
          - {name: standard, w: 20, eps: 1.0}    # `users` a list with one count per level)

``grace_s`` and ``clock`` do not apply to local streams (slots follow the wall clock; reports
are answers to requests, not timestamped events). Two rounds and their tallies must fit in a
slot: ``2 * (round_s + release_timeout_s) < slot_s``.

A level's ``population`` is the public number of users expected at that level (default 1000).
The personalized mechanisms' OBS uses it to pick the sampling threshold; it is never read from
the data, because a threshold that depends on who is active in a slot would leak. A wrong
figure costs accuracy, never privacy.

Per-stream scalars can be overridden by environment variables
``DPSTREAM_STREAM_<ID>_<FIELD>`` (``<ID>`` upper-cased, non-alphanumerics as ``_``; ``<FIELD>``
one of ``SLOT_S``, ``GRACE_S``, ``CLOCK``, ``RELEASE_TIMEOUT_S``, ``MECHANISM``, ``NOISE``,
``ROUND_S``).
Broker, state directory, metrics port, Kafka security and the noise key come only from the
environment; secrets are typed :class:`Secret` and never printed.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from app.dp.errors import DPError
from app.dp.registry import create, names
from app.dp.types import Group
from app.stream.errors import ConfigError

DEFAULT_STREAMS = Path(__file__).with_name("default_streams.yaml")
CLOCKS = ("wall", "event")
MODES = ("central", "local")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_OVERRIDABLE = {
    "SLOT_S": "slot_s",
    "GRACE_S": "grace_s",
    "CLOCK": "clock",
    "RELEASE_TIMEOUT_S": "release_timeout_s",
    "MECHANISM": "mechanism",
    "NOISE": "noise",
    "ROUND_S": "round_s",
}


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


DEFAULT_POPULATION = 1000
"""Users assumed at a level whose ``population`` is not configured (OBS input only)."""


@dataclass(frozen=True)
class Level:
    """A requirement level users may choose: ``eps``-DP over any ``w`` consecutive slots."""

    name: str
    w: int
    eps: float
    population: int = DEFAULT_POPULATION

    @property
    def group(self) -> Group:
        return Group(self.w, self.eps)


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

    @property
    def local(self) -> bool:
        return self.mode == "local"

    @property
    def users(self) -> int:
        """Local mode: registered users (indices ``0 .. users - 1``); 0 for central streams."""
        if not self.local:
            return 0
        u = self.params["users"]
        return int(sum(u)) if isinstance(u, list | tuple) else int(u)

    @property
    def d(self) -> int:
        return len(self.labels)

    @property
    def groups(self) -> tuple[Group, ...]:
        return tuple(level.group for level in self.levels)

    def build_mechanism(self) -> Any:
        """A fresh mechanism for this stream, built through the registry."""
        if self.local:
            if self.mechanism == "plbu":
                return create(self.mechanism, d=self.d, groups=list(self.groups), **self.params)
            level = self.levels[0]
            return create(self.mechanism, d=self.d, eps=level.eps, w=level.w, **self.params)
        return create(
            self.mechanism, d=self.d, groups=list(self.groups), noise=self.noise, **self.params
        )

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
    """Everything the worker needs, built once by :func:`load_settings` and passed down."""

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
    expose_data_counts: bool = False
    """Operator opt-in (``DPSTREAM_EXPOSE_DATA_COUNTS``): serve exact event and report counts
    by outcome on ``/metrics``. Off by default: they are data, not a mechanism's output."""

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
        return self.noise_key.reveal()


def _env_key(stream_id: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", stream_id.upper())


def _number(where: str, raw: Any, minimum: float, strict: bool) -> float:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{where} must be a number, got {raw!r}") from None
    if value != value or value < minimum or (strict and value == minimum):
        op = ">" if strict else ">="
        raise ConfigError(f"{where} must be {op} {minimum}, got {raw!r}")
    return value


def parse_stream(raw: Any, where: str, env: Mapping[str, str]) -> StreamConfig:
    """Validate one stream entry of the YAML file (after applying environment overrides)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a stream must be a mapping, got {raw!r}")
    sid = raw.get("id")
    if not isinstance(sid, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", sid):
        raise ConfigError(f"{where}.id must be 1-64 chars of [A-Za-z0-9._-], got {sid!r}")
    where = f"{where}[{sid}]"
    mech_raw = raw.get("mechanism", {"name": "pba"})
    if isinstance(mech_raw, str):
        mech_raw = {"name": mech_raw}
    if not isinstance(mech_raw, dict):
        raise ConfigError(f"{where}.mechanism must be a name or a mapping, got {mech_raw!r}")
    mode = raw.get("mode", "central")
    if mode not in MODES:
        raise ConfigError(f"{where}.mode must be one of {MODES}, got {mode!r}")
    values: dict[str, Any] = {
        "round_s": raw.get("round_s", 10.0),
        "slot_s": raw.get("slot_s", 60.0),
        "grace_s": raw.get("grace_s", 5.0),
        "clock": raw.get("clock", "wall"),
        "release_timeout_s": raw.get("release_timeout_s", 5.0),
        "mechanism": mech_raw.get("name", "pba"),
        "noise": mech_raw.get("noise", "laplace"),
    }
    prefix = f"DPSTREAM_STREAM_{_env_key(sid)}_"
    for suffix, key in _OVERRIDABLE.items():
        if prefix + suffix in env:
            values[key] = env[prefix + suffix]
    labels_raw = raw.get("labels")
    if labels_raw is None:
        d = raw.get("d")
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ConfigError(f"{where}: give `labels` (a list) or `d` (an int >= 1), got d={d!r}")
        labels = tuple(str(i) for i in range(d))
    elif isinstance(labels_raw, list) and labels_raw:
        labels = tuple(str(x) for x in labels_raw)
        if len(set(labels)) != len(labels):
            raise ConfigError(f"{where}.labels has duplicates: {labels_raw!r}")
        if "d" in raw and raw["d"] != len(labels):
            raise ConfigError(f"{where}.d is {raw['d']!r} but there are {len(labels)} labels")
    else:
        raise ConfigError(f"{where}.labels must be a non-empty list, got {labels_raw!r}")
    clock = str(values["clock"])
    if clock not in CLOCKS:
        raise ConfigError(f"{where}.clock must be one of {CLOCKS}, got {clock!r}")
    kind = "local" if mode == "local" else "central"
    if values["mechanism"] not in names(kind):
        raise ConfigError(
            f"{where}.mechanism.name must be one of {names(kind)} in {mode} mode, "
            f"got {values['mechanism']!r}"
        )
    params = mech_raw.get("params", {}) or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}.mechanism.params must be a mapping, got {params!r}")
    levels_raw = raw.get("levels")
    if not isinstance(levels_raw, list) or not levels_raw:
        raise ConfigError(f"{where}.levels must be a non-empty list of {{name, w, eps}}")
    levels: list[Level] = []
    for i, lv in enumerate(levels_raw):
        if not isinstance(lv, dict) or not isinstance(lv.get("name"), str):
            raise ConfigError(f"{where}.levels[{i}] must be a mapping with a name, got {lv!r}")
        try:
            group = Group(lv.get("w"), lv.get("eps"))  # type: ignore[arg-type]
        except DPError as exc:
            raise ConfigError(f"{where}.levels[{i}] ({lv['name']}): {exc}") from None
        population = lv.get("population", DEFAULT_POPULATION)
        if isinstance(population, bool) or not isinstance(population, int) or population < 0:
            raise ConfigError(
                f"{where}.levels[{i}] ({lv['name']}).population must be an integer >= 0, "
                f"got {population!r}"
            )
        levels.append(Level(lv["name"], group.w, group.eps, population))
    if len({lv.name for lv in levels}) != len(levels):
        raise ConfigError(f"{where}.levels has duplicate names")
    default_name = raw.get("default_level")
    if default_name is None:
        # The strictest level: the smallest per-slot budget eps / w (ties: the longest window).
        default = min(range(len(levels)), key=lambda i: (levels[i].eps / levels[i].w, -levels[i].w))
    else:
        found = [i for i, lv in enumerate(levels) if lv.name == default_name]
        if not found:
            raise ConfigError(f"{where}.default_level {default_name!r} is not a level name")
        default = found[0]
    stream = StreamConfig(
        id=sid,
        labels=labels,
        slot_s=_number(f"{where}.slot_s", values["slot_s"], 0.0, strict=True),
        grace_s=_number(f"{where}.grace_s", values["grace_s"], 0.0, strict=False),
        clock=clock,
        release_timeout_s=_number(
            f"{where}.release_timeout_s", values["release_timeout_s"], 0.0, strict=False
        ),
        mechanism=str(values["mechanism"]),
        noise=str(values["noise"]),
        params=dict(params),
        levels=tuple(levels),
        default_level=default,
        mode=mode,
        round_s=_number(f"{where}.round_s", values["round_s"], 0.0, strict=True),
    )
    if stream.local:
        _check_local(stream, where)
    try:
        stream.build_mechanism()
    except (DPError, TypeError) as exc:
        raise ConfigError(f"{where}.mechanism: {exc}") from None
    return stream


def _check_local(stream: StreamConfig, where: str) -> None:
    """The local-mode rules the registry cannot check: users, levels, rounds within a slot."""
    users = stream.params.get("users")
    if stream.mechanism == "plbu":
        if not isinstance(users, list) or len(users) != len(stream.levels):
            raise ConfigError(
                f"{where}.mechanism.params.users must list one user count per level for plbu, "
                f"got {users!r}"
            )
    else:
        if isinstance(users, bool) or not isinstance(users, int) or users < 1:
            raise ConfigError(
                f"{where}.mechanism.params.users (registered users) must be an int >= 1, "
                f"got {users!r}"
            )
        if len(stream.levels) != 1:
            raise ConfigError(
                f"{where}.levels: {stream.mechanism} serves exactly one level (w, eps), "
                f"got {len(stream.levels)}; use plbu for several"
            )
    if 2 * (stream.round_s + stream.release_timeout_s) >= stream.slot_s:
        raise ConfigError(
            f"{where}: two rounds must fit in a slot: 2 * (round_s {stream.round_s} + "
            f"release_timeout_s {stream.release_timeout_s}) must be < slot_s {stream.slot_s}"
        )


def load_streams(path: Path, env: Mapping[str, str] | None = None) -> tuple[StreamConfig, ...]:
    """Read and validate the streams file; :class:`ConfigError` names the file and the field."""
    env = os.environ if env is None else env
    try:
        doc = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read streams file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("streams"), list) or not doc["streams"]:
        raise ConfigError(f"{path}: expected a mapping with a non-empty `streams:` list")
    streams = tuple(
        parse_stream(s, f"{path}: streams[{i}]", env) for i, s in enumerate(doc["streams"])
    )
    ids = [s.id for s in streams]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: duplicate stream ids in {ids}")
    return streams


def parse_noise_key(text: str) -> Secret:
    """Decode a hex or base64 noise key of at least 16 bytes (the value itself never appears)."""
    text = text.strip()
    raw: bytes | None = None
    if re.fullmatch(r"(?:[0-9a-fA-F]{2})+", text):
        raw = bytes.fromhex(text)
    else:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None:
        raise ConfigError("the noise key is neither hex nor base64")
    if len(raw) < 16:
        raise ConfigError(f"the noise key must be at least 16 bytes, got {len(raw)}")
    return Secret(raw)


def _noise_key(env: Mapping[str, str]) -> Secret | None:
    if env.get("DPSTREAM_NOISE_KEY"):
        return parse_noise_key(env["DPSTREAM_NOISE_KEY"])
    path = env.get("DPSTREAM_NOISE_KEY_FILE")
    if path:
        try:
            return parse_noise_key(Path(path).read_text())
        except OSError as exc:
            raise ConfigError(
                f"cannot read DPSTREAM_NOISE_KEY_FILE {path}: {exc.strerror}"
            ) from None
    return None


def _security(env: Mapping[str, str]) -> KafkaSecurity:
    protocol = env.get("DPSTREAM_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(
            "DPSTREAM_KAFKA_SECURITY_PROTOCOL must be one of "
            f"{SECURITY_PROTOCOLS}, got {protocol!r}"
        )
    password = env.get("DPSTREAM_KAFKA_SASL_PASSWORD")
    return KafkaSecurity(
        protocol=protocol,
        sasl_mechanism=env.get("DPSTREAM_KAFKA_SASL_MECHANISM") or None,
        sasl_username=env.get("DPSTREAM_KAFKA_SASL_USERNAME") or None,
        sasl_password=Secret(password.encode()) if password else None,
        ssl_cafile=env.get("DPSTREAM_KAFKA_SSL_CAFILE") or None,
    )


def load_settings(env: Mapping[str, str] | None = None, config: Path | None = None) -> Settings:
    """Build :class:`Settings` from the environment (and an explicit streams file, if given)."""
    env = os.environ if env is None else env
    path = config or Path(env.get("DPSTREAM_CONFIG") or DEFAULT_STREAMS)
    port_raw = env.get("DPSTREAM_METRICS_PORT", "9464")
    if not port_raw.isdigit() or not 0 <= int(port_raw) < 65536:
        raise ConfigError(f"DPSTREAM_METRICS_PORT must be a port number, got {port_raw!r}")
    level = env.get("DPSTREAM_LOG_LEVEL", "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ConfigError(f"DPSTREAM_LOG_LEVEL must be a logging level, got {level!r}")
    return Settings(
        broker=env.get("DPSTREAM_BROKER") or None,
        state_dir=Path(env.get("DPSTREAM_STATE_DIR") or "./dpstream-state"),
        metrics_port=int(port_raw),
        metrics_bind=env.get("DPSTREAM_METRICS_BIND", "0.0.0.0"),  # noqa: S104 - pod IP
        noise_key=_noise_key(env),
        security=_security(env),
        log_level=level,
        topic_prefix=env.get("DPSTREAM_TOPIC_PREFIX", ""),
        session_timeout_s=_number(
            "DPSTREAM_SESSION_TIMEOUT_S", env.get("DPSTREAM_SESSION_TIMEOUT_S", "10"), 1.0, False
        ),
        streams=load_streams(path, env),
        config_path=path,
        expose_data_counts=_flag(env, "DPSTREAM_EXPOSE_DATA_COUNTS"),
    )


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw not in ("", "0", "false", "no", "off", "1", "true", "yes", "on"):
        raise ConfigError(f"{name} must be true or false, got {raw!r}")
    return raw in ("1", "true", "yes", "on")
