"""The streams file: parse and bound every field, one clear line per mistake.

Streams come from one YAML file (``DPSTREAM_CONFIG``, else ``app/stream/default_streams.yaml``;
``dpstream demo`` runs ``app/stream/demo_streams.yaml``)::

    streams:
      - id: clicks                  # stream id: key of releases, ledgers and metrics
        labels: [home, news, ...]   # the domain; d = len(labels) (or give `d:` without labels)
        slot_s: 2.0                 # slot length in seconds
        grace_s: 0.5                # a slot closes once every partition is past its end + grace
        clock: wall                 # wall (production) | event (replay: event time, <= wall - skew)
        release_timeout_s: 30       # wait for a silent partition before closing without it
        max_delay_s: 60             # wait for partitions that are alive but behind, at most
        neighbours: replace         # replace (default) | add-remove (the papers' relation)
        max_values: 1               # distinct values per user per slot (the papers' l)
        sum: {alpha: 50}            # optional: sum each event's `amount` (clipped to alpha)
        mechanism: {name: pba, noise: geometric, params: {}}
        levels:                     # the requirement levels users may choose
          - {name: strict, w: 20, eps: 0.5, population: 9000}
          - {name: relaxed, w: 10, eps: 1.0, population: 1000}
        default_level: strict       # optional; must satisfy every level (max w, min eps)

``mechanism.noise`` is ``geometric`` unless given, for every kind: DP as implemented (exact
discrete noise for counts, discrete noise on a grid for real values, :mod:`app.dp.noise`).
``noise: laplace`` (numpy's floating-point Laplace, the papers' noise) is not DP as implemented
(Mironov 2012): a central stream naming it is refused unless it sets
``accept_weaker_guarantee: true``; a local stream adds no service noise and takes none.

The papers' settings that are *not* w-event private are refused the same way: a period
mechanism's ``strict: false`` (a window of ``w`` slots straddling two periods loses up to
``2 eps``) and OptStream's ``feature_sensitivity: paper``, and PLDP's ``split_rule:
paper_ceil_z`` (rounds the population ledger must refuse at run time). With the flag, every
release and audit record, ``/budget`` and the status page carry ``weaker_guarantee`` (the
reasons) and the worker logs a warning at start.

Local mode (``mode: local``; devices perturb, the service only aggregates reports)::

      - id: app-usage
        mode: local                 # central (default) | local
        d: 16
        slot_s: 300
        round_s: 60                 # deadline of one collection round (at most 2 per slot)
        release_timeout_s: 5        # extra wait for reports partitions after a round's deadline
        mechanism:
          name: lpa                 # a registered local mechanism
          params: {users: 100000, oracle: grr}   # registered users (indices 0..users-1)
        levels:                     # one level (w, eps); a personalized mechanism takes several
          - {name: standard, w: 20, eps: 1.0}

Unknown keys are refused (a typo such as ``slot_seconds`` would otherwise be ignored), numbers
must be numbers (``eps: true`` is refused), and every value must lie within :data:`BOUNDS`,
the sizes the service is built and tested for (a ledger entry of the largest stream stays far
below the producer's 1 MB request limit).

``grace_s`` and ``clock`` do not apply to local streams. Two rounds and their tallies must fit
in a slot: ``2 * (round_s + release_timeout_s) < slot_s``.

A level's ``population`` is the public number of users expected at that level (default 1000).
The personalized mechanisms' OBS uses it to pick the sampling threshold; it is never read from
the data, because a threshold that depends on who is active in a slot would leak.

The default level (users with no recorded preference) must satisfy every level the stream
offers: ``w >= w_i`` and ``eps <= eps_i`` for all ``i``. Without ``default_level``, the level
that does is chosen; if none does, a level ``default`` at ``(max w, min eps)`` is added.

A *sum stream* (``sum: {alpha: A}``) releases per category the sum of the users' ``amount``
fields instead of a count of users: the collect stage keeps each user's first amount per value
and slot, clipped to ``A`` (the (w, alpha) model of OptStream, spec seed-001 §1.3), and the
mechanism's sensitivity becomes ``A`` times the count sensitivity (``A`` add-remove, ``2 A``
replace, times ``max_values``). Only the period mechanisms take a sensitivity in ``alpha``
(:data:`SUM_KINDS`); a sum stream naming another mechanism is refused.

A (w,n) mechanism (``stbd``, ``str``) names the public graph over the labels and its spatial
window ``n`` under ``graph:`` (an edge-list file or a ``rows x cols`` grid; see
:mod:`app.stream.config.graph`); ``rescuedp`` is place level and takes none.

Streams that count the same users form a privacy unit (the file's ``privacy:`` section, by
default one unit of all central streams): every stream carries the unit's bound on what one
user can lose across them in an interval (:mod:`app.stream.config.units`).

An open-domain stream (``domain: open``: keys nobody listed, each event's ``value`` the key)
takes ``max_keys``, ``max_key_chars``, ``retire_after``, a ``delta`` per level and the
mechanism ``open_uniform`` or ``open_pba`` instead of labels: :mod:`app.stream.config.open`.

Per-stream scalars can be overridden by environment variables
``DPSTREAM_STREAM_<ID>_<FIELD>`` (``<ID>`` upper-cased, non-alphanumerics as ``_``; ``<FIELD>``
one of the keys of :data:`OVERRIDABLE`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from app.dp.errors import DPError
from app.dp.interfaces import as_round
from app.dp.noise import check_grid
from app.dp.registry import get, names
from app.stream.config.graph import MECHANISM_GRAPH_PARAMS, parse_graph
from app.stream.config.model import (
    DEFAULT_POPULATION,
    DOMAINS,
    NEIGHBOURS,
    OPEN_MECHANISMS,
    Level,
    StreamConfig,
)
from app.stream.config.open import (
    DEFAULT_MECHANISM,
    OPEN_DEFAULTS,
    OPEN_KEYS,
    check_labels,
    check_open,
)
from app.stream.config.units import with_units
from app.stream.errors import ConfigError

CLOCKS = ("wall", "event")
MODES = ("central", "local")
NOISES = ("geometric", "laplace")
CENTRAL_KINDS = ("central", "period", "graph")
"""Mechanism kinds a ``mode: central`` stream may run: per-slot ones and period ones (OptStream
and its baselines release a period of ``w`` slots at its end), and the
(w,n) ones over a public graph of the labels (the ``graph:`` key, :mod:`.graph`)."""
SUM_KINDS = ("period",)
"""Mechanism kinds valid for a sum stream: their noise is calibrated to ``alpha``."""
OVERRIDABLE = {
    "SLOT_S": "slot_s",
    "GRACE_S": "grace_s",
    "CLOCK": "clock",
    "RELEASE_TIMEOUT_S": "release_timeout_s",
    "MAX_DELAY_S": "max_delay_s",
    "MECHANISM": "mechanism",
    "NOISE": "noise",
    "ROUND_S": "round_s",
    "NEIGHBOURS": "neighbours",
    "MAX_VALUES": "max_values",
}
STREAM_KEYS = frozenset(
    {"id", "labels", "d", "mode", "levels", "default_level", "graph", "sum"}
    | {"accept_weaker_guarantee"}
    | set(OVERRIDABLE.values())
    | OPEN_KEYS
)
SUM_KEYS = frozenset({"alpha"})
MECHANISM_KEYS = frozenset({"name", "noise", "params"})
LEVEL_KEYS = frozenset({"name", "w", "eps", "population", "delta"})
BOUNDS: dict[str, tuple[float, float]] = {
    "d": (1, 10_000),
    "w": (1, 10_000),
    "eps": (1e-6, 1_000.0),
    "population": (0, 10**9),
    "levels": (1, 16),
    "slot_s": (0.1, 86_400.0),
    "grace_s": (0.0, 3_600.0),
    "release_timeout_s": (0.1, 3_600.0),  # 0 would close every slot without waiting
    "max_delay_s": (0.1, 86_400.0),
    "round_s": (0.01, 86_400.0),
    "max_values": (1, 1_000),
    "alpha": (1e-6, 1e9),
    "delta": (0.0, 1.0),  # an open stream's mechanism refuses more than 1e-3 (MAX_DELTA)
    "max_keys": (1, 1_000),
    "max_key_chars": (1, 4_096),
    "retire_after": (1, 1_000_000),
    "max_released_keys": (1, 100_000),
}
"""Inclusive ``(low, high)`` of every bounded field. ``eps`` is bounded where the samplers stay
exact (``exp(-eps)`` stays a normal double): beyond a few units it protects nothing, but tests
that check true counts through a mechanism run at eps in the hundreds."""
LOCAL_RELEASE_TIMEOUT_S = 5.0
"""A local stream's default ``release_timeout_s``: it waits for a round's tallies, not for a
silent worker's partitions to be taken over (the central default covers a rebalance)."""
DEFAULTS: dict[str, Any] = {
    "slot_s": 60.0,
    "grace_s": 5.0,
    "clock": "wall",
    "release_timeout_s": 30.0,
    "round_s": 10.0,
    "noise": "geometric",
    "neighbours": "replace",
    "max_values": 1,
}


def number(where: str, raw: Any, field: str, integer: bool = False) -> float:
    """``raw`` as a finite number within ``BOUNDS[field]``, or one :class:`ConfigError` line.

    Strings are accepted (environment overrides are strings); booleans are not numbers.

    >>> number("s.slot_s", "2", "slot_s")
    2.0
    >>> number("s.levels[0].eps", True, "eps")
    Traceback (most recent call last):
    ...
    app.stream.errors.ConfigError: s.levels[0].eps must be a number, got True
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ConfigError(f"{where} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{where} must be a number, got {raw!r}") from None
    low, high = BOUNDS[field]
    if not math.isfinite(value) or not low <= value <= high:
        raise ConfigError(f"{where} must be a finite number in [{low:g}, {high:g}], got {raw!r}")
    if integer and value != int(value):
        raise ConfigError(f"{where} must be an integer, got {raw!r}")
    return value


def _keys(where: str, raw: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(map(str, raw)) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _choice(where: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(f"{where} must be one of {choices}, got {value!r}")
    return str(value)


def _env_key(stream_id: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", stream_id.upper())


def _labels(where: str, raw: Mapping[str, Any]) -> tuple[str, ...]:
    labels_raw = raw.get("labels")
    if labels_raw is None:
        d = raw.get("d")
        if isinstance(d, bool) or not isinstance(d, int):
            raise ConfigError(f"{where}: give `labels` (a list) or `d` (an int >= 1), got d={d!r}")
        number(f"{where}.d", d, "d", integer=True)
        return tuple(str(i) for i in range(d))
    if not isinstance(labels_raw, list) or not labels_raw:
        raise ConfigError(f"{where}.labels must be a non-empty list, got {labels_raw!r}")
    labels = tuple(str(x) for x in labels_raw)
    number(f"{where}.labels (count)", len(labels), "d", integer=True)
    if len(set(labels)) != len(labels):
        raise ConfigError(f"{where}.labels has duplicates")
    if "d" in raw and raw["d"] != len(labels):
        raise ConfigError(f"{where}.d is {raw['d']!r} but there are {len(labels)} labels")
    return labels


def _level(where: str, raw: Any) -> Level:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError(f"{where} must be a mapping with a name, got {raw!r}")
    where = f"{where} ({raw['name']})"
    _keys(where, raw, LEVEL_KEYS)
    w = raw.get("w")
    if isinstance(w, bool) or not isinstance(w, int):
        raise ConfigError(f"{where}.w must be an integer, got {w!r}")
    w = int(number(f"{where}.w", w, "w", integer=True))
    if isinstance(raw.get("eps"), str):  # a level is never overridden from the environment
        raise ConfigError(f"{where}.eps must be a number, not the string {raw.get('eps')!r}")
    eps = number(f"{where}.eps", raw.get("eps"), "eps")
    pop_raw = raw.get("population", DEFAULT_POPULATION)
    if isinstance(pop_raw, bool) or not isinstance(pop_raw, int):
        raise ConfigError(f"{where}.population must be an integer, got {pop_raw!r}")
    population = int(number(f"{where}.population", pop_raw, "population", integer=True))
    if isinstance(raw.get("delta"), str):
        raise ConfigError(f"{where}.delta must be a number, not the string {raw.get('delta')!r}")
    delta = number(f"{where}.delta", raw.get("delta", 0.0), "delta")
    return Level(raw["name"], w, eps, population, delta)


def _levels(where: str, raw: Mapping[str, Any]) -> tuple[tuple[Level, ...], int]:
    """The levels and the index of the default one (added if no level satisfies all)."""
    levels_raw = raw.get("levels")
    if not isinstance(levels_raw, list) or not levels_raw:
        raise ConfigError(f"{where}.levels must be a non-empty list of {{name, w, eps}}")
    number(f"{where}.levels (count)", len(levels_raw), "levels", integer=True)
    levels = [_level(f"{where}.levels[{i}]", lv) for i, lv in enumerate(levels_raw)]
    if len({lv.name for lv in levels}) != len(levels):
        raise ConfigError(f"{where}.levels has duplicate names")
    safe = [i for i, lv in enumerate(levels) if all(lv.satisfies(o) for o in levels)]
    name = raw.get("default_level")
    if name is not None:
        found = [i for i, lv in enumerate(levels) if lv.name == name]
        if not found:
            raise ConfigError(f"{where}.default_level {name!r} is not a level name")
        if found[0] not in safe:
            raise ConfigError(
                f"{where}.default_level {name!r} does not satisfy every level: the default "
                "must have the largest w and the smallest eps (omit it to get one)"
            )
        return tuple(levels), found[0]
    if safe:
        return tuple(levels), safe[0]
    strictest = Level(
        "default" if "default" not in {lv.name for lv in levels} else "default-strictest",
        max(lv.w for lv in levels),
        min(lv.eps for lv in levels),
        DEFAULT_POPULATION,
        min(lv.delta for lv in levels),
    )
    return (*levels, strictest), len(levels)


def _alpha(
    where: str, raw: Any, mode: str, mechanism: str, params: Mapping[str, Any]
) -> float | None:
    """The ``sum: {alpha: A}`` bound of a sum stream (None: a count stream), checked against the
    mode and the mechanism (only :data:`SUM_KINDS` calibrate their noise to ``alpha``)."""
    if "alpha" in params:
        raise ConfigError(f"{where}.mechanism.params: give the sum bound as `sum: {{alpha: ...}}`")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}.sum must be a mapping {{alpha: number}}, got {raw!r}")
    _keys(f"{where}.sum", raw, SUM_KEYS)
    alpha = number(f"{where}.sum.alpha", raw.get("alpha"), "alpha")
    if mode == "local":
        raise ConfigError(f"{where}.sum: local streams count reports; sums are central only")
    if get(mechanism).kind not in SUM_KINDS:
        allowed = [n for kind in SUM_KINDS for n in names(kind)]
        raise ConfigError(
            f"{where}.sum: mechanism {mechanism!r} does not release sums; use one of {allowed}"
        )
    return alpha


def _stream_id(raw: Any, where: str) -> str:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a stream must be a mapping, got {raw!r}")
    sid = raw.get("id")
    if not isinstance(sid, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", sid):
        raise ConfigError(f"{where}.id must be 1-64 chars of [A-Za-z0-9._-], got {sid!r}")
    return sid


def _mechanism_entry(where: str, raw: Mapping[str, Any], default: str) -> dict[str, Any]:
    """The ``mechanism:`` mapping (a bare name is ``{name: ...}``; default ``default``)."""
    mech_raw = raw.get("mechanism", {"name": default})
    if isinstance(mech_raw, str):
        mech_raw = {"name": mech_raw}
    if not isinstance(mech_raw, dict):
        raise ConfigError(f"{where}.mechanism must be a name or a mapping, got {mech_raw!r}")
    _keys(f"{where}.mechanism", mech_raw, MECHANISM_KEYS)
    return mech_raw


def _values(
    raw: Mapping[str, Any], mode: str, mech_raw: Mapping[str, Any], sid: str, env: Mapping[str, str]
) -> dict[str, Any]:
    """The overridable fields: the file's values over the defaults, then the environment's."""
    values = {key: raw.get(key, default) for key, default in DEFAULTS.items()}
    if mode == "local":
        values["release_timeout_s"] = raw.get("release_timeout_s", LOCAL_RELEASE_TIMEOUT_S)
    values.update(mechanism=mech_raw.get("name"), noise=mech_raw.get("noise", "geometric"))
    try:
        slot_s = float(values["slot_s"] or 0)
    except (TypeError, ValueError):  # parse_stream refuses it, naming the field
        slot_s = 0.0
    values["max_delay_s"] = raw.get("max_delay_s", max(60.0, 5 * slot_s))
    prefix = f"DPSTREAM_STREAM_{_env_key(sid)}_"
    for suffix, key in OVERRIDABLE.items():
        if prefix + suffix in env:
            values[key] = env[prefix + suffix]
    return values


def _params(where: str, mech_raw: Mapping[str, Any], mechanism: str) -> dict[str, Any]:
    params = mech_raw.get("params", {}) or {}
    if not isinstance(params, dict):
        raise ConfigError(f"{where}.mechanism.params must be a mapping, got {params!r}")
    if mechanism in OPEN_MECHANISMS:
        return params
    if get(mechanism).kind == "graph" and MECHANISM_GRAPH_PARAMS & set(map(str, params)):
        raise ConfigError(f"{where}.mechanism.params: name the graph and n under `graph:`")
    return params


def parse_stream(
    raw: Any, where: str, env: Mapping[str, str], base_dir: Path | None = None
) -> StreamConfig:
    """Validate one stream entry of the YAML file (after applying environment overrides);
    ``base_dir``: where the file's relative paths (a graph's edge list) start (default: cwd)."""
    sid = _stream_id(raw, where)
    where = f"{where}[{sid}]"
    _keys(where, raw, STREAM_KEYS)
    domain = _choice(f"{where}.domain", raw.get("domain", "labels"), DOMAINS)
    is_open = domain == "open"
    mech_raw = _mechanism_entry(where, raw, DEFAULT_MECHANISM if is_open else "pba")
    mode = _choice(f"{where}.mode", raw.get("mode", "central"), MODES)
    values = _values(raw, mode, mech_raw, sid, env)
    if is_open:
        check_open(where, raw, mode, values["noise"])
        allowed = tuple(OPEN_MECHANISMS)
    else:
        check_labels(where, raw)
        kinds = ("local",) if mode == "local" else CENTRAL_KINDS
        allowed = tuple(n for kind in kinds for n in names(kind))
    mechanism = _choice(f"{where}.mechanism.name", values["mechanism"], allowed)
    params = _params(where, mech_raw, mechanism)
    levels, default = _levels(where, raw)
    labels = () if is_open else _labels(where, raw)
    graph, alpha = None, None
    if not is_open:
        base = base_dir or Path()
        graph = parse_graph(f"{where}.graph", raw.get("graph"), mechanism, labels, base)
        alpha = _alpha(where, raw.get("sum"), mode, mechanism, params)
    max_keys, max_key_chars, retire_after, max_released_keys = (
        int(number(f"{where}.{key}", raw.get(key, value), key, integer=True))
        for key, value in OPEN_DEFAULTS.items()
    )
    stream = StreamConfig(
        id=sid,
        labels=labels,
        slot_s=number(f"{where}.slot_s", values["slot_s"], "slot_s"),
        grace_s=number(f"{where}.grace_s", values["grace_s"], "grace_s"),
        clock=_choice(f"{where}.clock", values["clock"], CLOCKS),
        release_timeout_s=number(
            f"{where}.release_timeout_s", values["release_timeout_s"], "release_timeout_s"
        ),
        max_delay_s=number(f"{where}.max_delay_s", values["max_delay_s"], "max_delay_s"),
        mechanism=mechanism,
        noise=_choice(f"{where}.mechanism.noise", values["noise"], NOISES),
        params=dict(params),
        levels=levels,
        default_level=default,
        mode=mode,
        round_s=number(f"{where}.round_s", values["round_s"], "round_s"),
        neighbours=_choice(f"{where}.neighbours", values["neighbours"], NEIGHBOURS),
        max_values=int(
            number(f"{where}.max_values", values["max_values"], "max_values", integer=True)
        ),
        graph=graph,
        alpha=alpha,
        accept_weaker_guarantee=_flag(
            f"{where}.accept_weaker_guarantee", raw.get("accept_weaker_guarantee", False)
        ),
        domain=domain,
        max_keys=max_keys,
        max_key_chars=max_key_chars,
        retire_after=retire_after,
        max_released_keys=max_released_keys,
    )
    if stream.local and stream.max_values != 1:
        raise ConfigError(f"{where}.max_values: local streams take one value per report")
    if stream.local:
        _check_local(stream, where)
    try:
        built = stream.build_mechanism()
        weaker = built.weaker_guarantee()
        _check_grid(stream)
        users = as_round(built).users if stream.local else 0  # the mechanism's own statement
    except (DPError, TypeError) as exc:
        raise ConfigError(f"{where}.mechanism: {exc}") from None
    reasons = [r for r in (_noise_weakness(stream, where), weaker) if r]
    if reasons and not stream.accept_weaker_guarantee:
        raise ConfigError(
            f"{where}.mechanism: not w-event private as implemented ({'; '.join(reasons)}); "
            "remove the setting, or set `accept_weaker_guarantee: true` on the stream to run "
            "with the weaker guarantee"
        )
    return dataclasses.replace(stream, weaker_guarantee="; ".join(reasons) or None, users=users)


LAPLACE_WEAKNESS = "noise: laplace is floating-point Laplace, not eps-DP as implemented"
"""The reason a ``noise: laplace`` stream carries in ``weaker_guarantee`` (Mironov 2012: most
floating-point outputs of a count are unreachable from its neighbour)."""


def _noise_weakness(stream: StreamConfig, where: str) -> str | None:
    """Why the stream's noise is not DP as implemented (None: ``geometric``); a local stream
    adds no service noise, so it may not name one."""
    if stream.noise == "geometric":
        return None
    if stream.local:
        raise ConfigError(
            f"{where}.mechanism.noise: a local stream adds no service noise (devices randomize "
            f"their reports); remove `noise: {stream.noise}`"
        )
    return LAPLACE_WEAKNESS


def _check_grid(stream: StreamConfig) -> None:
    """A period stream's real values (sums, features, DFT coefficients) must stay below
    ``2**40`` steps of the noise grid (:func:`app.dp.noise.check_grid`; every draw checks it
    again). A draw of ``n`` values of joint sensitivity ``S`` has steps of at least
    ``S / (128 n)``, so a value of magnitude ``M`` is at most ``128 n M / S`` steps. With ``U``
    the public users (the levels' populations, times ``max_values``) and ``s`` one slot's
    sensitivity (``alpha`` cancels out), the period mechanisms' draws are: one slot's rows
    (``M = U``, ``n / S = d / s``), features of up to ``w`` slots (``M = w U``, ``n / S <= 1 / s``,
    or ``w / s`` at the paper's feature sensitivity) and ``keep <= w`` DFT coefficients of ``w``
    slots (``M = w U``, ``n / S = 2 sqrt(keep d / w) / s``). So no value passes
    ``128 U max(d, 2 w sqrt(d), w^2) / s`` steps; that figure is checked, with the grid's own
    factor-two rounding on top."""
    if not stream.period or stream.noise != "geometric":
        return
    w, d = max(lv.w for lv in stream.levels), stream.d
    users = sum(lv.population for lv in stream.levels) * stream.max_values
    reach = max(d, 2 * w * math.sqrt(d), w * w)
    check_grid(2 * users * reach, stream.sensitivity, 1)


def _flag(where: str, raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(f"{where} must be true or false, got {raw!r}")
    return raw


def _check_local(stream: StreamConfig, where: str) -> None:
    """The local-mode rules the registry cannot check: users, rounds within a slot."""
    users = stream.params.get("users")
    counts = users if isinstance(users, list) else [users]
    if not counts or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in counts):
        raise ConfigError(
            f"{where}.mechanism.params.users (registered users: an int >= 1, or one per level "
            f"for a personalized mechanism) got {users!r}"
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
        doc = read_yaml(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read streams file {path}: {exc.strerror}") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}, {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("streams"), list) or not doc["streams"]:
        raise ConfigError(f"{path}: expected a mapping with a non-empty `streams:` list")
    _keys(str(path), doc, frozenset({"streams", "privacy"}))
    streams = tuple(
        parse_stream(s, f"{path}: streams[{i}]", env, path.parent)
        for i, s in enumerate(doc["streams"])
    )
    ids = [s.id for s in streams]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{path}: duplicate stream ids in {ids}")
    return with_units(streams, doc.get("privacy"), path)


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that repeats a key (the last one would win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise ConfigError(f"line {line}: duplicate key {key!r} (the last would win)")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def read_yaml(text: str) -> Any:
    """``text`` as YAML (safe types only); :class:`ConfigError` for a repeated key.

    >>> read_yaml("a: 1\\nb: 2")
    {'a': 1, 'b': 2}
    >>> read_yaml("a: 1\\na: 2")
    Traceback (most recent call last):
    ...
    app.stream.errors.ConfigError: line 2: duplicate key 'a' (the last would win)
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
