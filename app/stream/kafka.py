"""Client settings for the three Kafka clients dpstream uses, from one :class:`Settings`.

confluent-kafka (admin, bench, tools), aiokafka (the ingest hot path) and Faust (agents and
tables) each spell security options differently; this module is the one translation.
"""

from __future__ import annotations

import ssl
from typing import Any

from app.stream.config import KafkaSecurity, Settings
from app.stream.errors import ConfigError


def bootstrap(settings: Settings) -> str:
    """The broker address, or a :class:`ConfigError` saying how to set it."""
    if not settings.broker:
        raise ConfigError("no broker: set DPSTREAM_BROKER (e.g. 127.0.0.1:9092)")
    return settings.broker


def confluent_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """librdkafka configuration (``bootstrap.servers`` and security)."""
    sec = settings.security
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap(settings)}
    conf["security.protocol"] = sec.protocol
    if sec.sasl_mechanism:
        conf["sasl.mechanism"] = sec.sasl_mechanism
    if sec.sasl_username:
        conf["sasl.username"] = sec.sasl_username
    if sec.sasl_password:
        conf["sasl.password"] = sec.sasl_password.reveal().decode()
    if sec.ssl_cafile:
        conf["ssl.ca.location"] = sec.ssl_cafile
    conf.update(extra)
    return conf


def _ssl_context(sec: KafkaSecurity) -> ssl.SSLContext | None:
    if "SSL" not in sec.protocol:
        return None
    return ssl.create_default_context(cafile=sec.ssl_cafile)


def aiokafka_kwargs(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for aiokafka consumers and producers."""
    sec = settings.security
    kw: dict[str, Any] = {
        "bootstrap_servers": bootstrap(settings),
        "security_protocol": sec.protocol,
    }
    ctx = _ssl_context(sec)
    if ctx is not None:
        kw["ssl_context"] = ctx
    if sec.sasl_mechanism:
        kw["sasl_mechanism"] = sec.sasl_mechanism
        kw["sasl_plain_username"] = sec.sasl_username
        kw["sasl_plain_password"] = (
            sec.sasl_password.reveal().decode() if sec.sasl_password else None
        )
    return kw


def faust_credentials(settings: Settings) -> Any:
    """``broker_credentials`` for ``faust.App`` (``None`` for PLAINTEXT)."""
    import faust

    sec = settings.security
    ctx = _ssl_context(sec)
    if sec.protocol.startswith("SASL"):
        if sec.sasl_mechanism not in (None, "PLAIN"):
            raise ConfigError(
                f"the Faust agents support SASL PLAIN only, got {sec.sasl_mechanism!r}"
            )
        return faust.SASLCredentials(
            username=sec.sasl_username,
            password=sec.sasl_password.reveal().decode() if sec.sasl_password else None,
            ssl_context=ctx,
        )
    if ctx is not None:
        return faust.SSLCredentials(ctx)
    return None
