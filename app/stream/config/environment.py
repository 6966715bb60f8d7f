"""The worker's settings from the environment: broker, state, metrics, security, the noise key.

Secrets (the noise key, the SASL password) come only from the environment or a mounted file,
are typed :class:`~app.stream.config.model.Secret` and never printed.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path

from app.stream.config.model import (
    DEFAULT_STREAMS,
    DEPLOYMENT_REQUIRED,
    KafkaSecurity,
    Secret,
    Settings,
)
from app.stream.config.streams import load_streams
from app.stream.errors import ConfigError

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
TRUE, FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


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


_DEPLOYMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}")


def deployment_id(env: Mapping[str, str], keyed: bool) -> str:
    """The deployment's identity: ``DPSTREAM_DEPLOYMENT``, else the content of
    ``DPSTREAM_DEPLOYMENT_FILE`` (compose generates one beside the key). Required whenever
    a noise key is set (``keyed``): there is no default two deployments could share.

    >>> deployment_id({"DPSTREAM_DEPLOYMENT": "prod.eu-west-1"}, keyed=True)
    'prod.eu-west-1'
    >>> deployment_id({}, keyed=False)
    ''
    >>> deployment_id({"DPSTREAM_DEPLOYMENT": ""}, keyed=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.stream.errors.ConfigError: DPSTREAM_DEPLOYMENT (or DPSTREAM_DEPLOYMENT_FILE) must name...
    """
    raw = env.get("DPSTREAM_DEPLOYMENT", "").strip()
    path = env.get("DPSTREAM_DEPLOYMENT_FILE")
    if not raw and path:
        try:
            raw = Path(path).read_text().strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read DPSTREAM_DEPLOYMENT_FILE {path}: {exc.strerror}"
            ) from None
    if not raw:
        if keyed:
            raise ConfigError(DEPLOYMENT_REQUIRED)
        return ""
    if not _DEPLOYMENT.fullmatch(raw):
        raise ConfigError(
            "DPSTREAM_DEPLOYMENT must be 1-128 chars of [A-Za-z0-9._:/@-], starting with a "
            f"letter or digit, got {raw[:140]!r}"
        )
    return raw


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


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw not in TRUE + FALSE:
        raise ConfigError(f"{name} must be true or false, got {raw!r}")
    return raw in TRUE


_HOST_LABEL = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def metrics_bind(raw: str) -> str:
    """``DPSTREAM_METRICS_BIND``: an IPv4 or IPv6 address, or a host name (RFC 1123 labels, not
    all digits), or one :class:`ConfigError` line.

    >>> metrics_bind("0.0.0.0"), metrics_bind("::1"), metrics_bind("localhost")
    ('0.0.0.0', '::1', 'localhost')
    >>> metrics_bind("999.1.1.1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    app.stream.errors.ConfigError: DPSTREAM_METRICS_BIND must be an IP address ..., got '999.1.1.1'
    """
    try:
        ipaddress.ip_address(raw)
        return raw
    except ValueError:
        pass
    labels = raw.split(".")
    if (
        len(raw) <= 253
        and all(_HOST_LABEL.fullmatch(label) for label in labels)
        and not all(label.isdigit() for label in labels)
    ):
        return raw
    raise ConfigError(f"DPSTREAM_METRICS_BIND must be an IP address or a host name, got {raw!r}")


def _seconds(env: Mapping[str, str], name: str, default: str, low: float, high: float) -> float:
    raw = env.get(name, default)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or not low <= value <= high:
        raise ConfigError(f"{name} must be a number of seconds in [{low:g}, {high:g}], got {raw!r}")
    return value


def load_settings(env: Mapping[str, str] | None = None, config: Path | None = None) -> Settings:
    """Build :class:`Settings` from the environment (and an explicit streams file, if given)."""
    env = os.environ if env is None else env
    path = config or Path(env.get("DPSTREAM_CONFIG") or DEFAULT_STREAMS)
    port_raw = env.get("DPSTREAM_METRICS_PORT", "9464")
    if not port_raw.isdigit() or not 0 <= int(port_raw) < 65536:
        raise ConfigError(f"DPSTREAM_METRICS_PORT must be a port number, got {port_raw!r}")
    level = env.get("DPSTREAM_LOG_LEVEL", "INFO").upper()
    if level not in LOG_LEVELS:
        raise ConfigError(f"DPSTREAM_LOG_LEVEL must be a logging level, got {level!r}")
    prefix = env.get("DPSTREAM_TOPIC_PREFIX", "")
    key = _noise_key(env)
    return Settings(
        broker=env.get("DPSTREAM_BROKER") or None,
        state_dir=Path(env.get("DPSTREAM_STATE_DIR") or "./dpstream-state"),
        metrics_port=int(port_raw),
        metrics_bind=metrics_bind(env.get("DPSTREAM_METRICS_BIND", "0.0.0.0")),  # noqa: S104
        noise_key=key,
        security=_security(env),
        log_level=level,
        topic_prefix=prefix,
        session_timeout_s=_seconds(env, "DPSTREAM_SESSION_TIMEOUT_S", "10", 1.0, 300.0),
        delivery_horizon_s=_seconds(env, "DPSTREAM_DELIVERY_HORIZON_S", "10", 1.0, 600.0),
        streams=load_streams(path, env),
        config_path=path,
        deployment=deployment_id(env, keyed=key is not None),
        expose_data_counts=_flag(env, "DPSTREAM_EXPOSE_DATA_COUNTS"),
    )
