"""Client settings for the three Kafka clients dpstream uses, from one :class:`Settings`.

confluent-kafka (admin, bench, tools), aiokafka (the ingest hot path) and Faust (agents and
tables) each spell security options differently; this module is the one translation.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
from collections.abc import Mapping
from typing import Any

from app.stream.config import KafkaSecurity, Settings
from app.stream.errors import BrokerUnreachable, ConfigError

PROBE_TIMEOUT_S = 5.0
"""Default of :func:`probe_timeout_s`: how long a verb waits for the broker before it gives up."""

_LOG = logging.getLogger(__name__)
_QUIET = logging.getLogger("dpstream.librdkafka.probe")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


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


def probe_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """``DPSTREAM_BROKER_TIMEOUT_S`` (seconds, > 0), else :data:`PROBE_TIMEOUT_S`."""
    env = os.environ if env is None else env
    text = env.get("DPSTREAM_BROKER_TIMEOUT_S", "").strip()
    if not text:
        return PROBE_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(
            f"DPSTREAM_BROKER_TIMEOUT_S must be a number of seconds > 0, got {text!r}"
        )
    return value


def probe(settings: Settings, timeout_s: float = PROBE_TIMEOUT_S) -> int:
    """Ask the broker for its metadata once; return the number of brokers in the cluster.

    One metadata request, bounded by ``timeout_s``, with librdkafka's own log kept quiet (it
    would print a line per reconnection attempt): if no broker answers, raise
    :class:`BrokerUnreachable` with the address and the first connection error librdkafka
    reported (refused, unresolvable host, TLS or SASL failure), or "no answer within N s".
    Every verb that talks to Kafka calls it first, so an unreachable broker is one line.
    """
    refused = _refused(bootstrap(settings), min(timeout_s, 1.0))
    if refused:
        raise BrokerUnreachable(bootstrap(settings), refused)
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    ms = max(1000, int(timeout_s * 1000))
    admin = AdminClient(
        confluent_config(
            settings,
            **{
                "error_cb": errors.append,
                "logger": _QUIET,
                "log_level": 0,  # the error callback still sees every connection error
                "socket.connection.setup.timeout.ms": ms,
                "reconnect.backoff.max.ms": min(ms, 2000),
            },
        )
    )
    try:
        meta = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(0)  # serves error_cb (and the log, to the quiet logger)
        raise BrokerUnreachable(bootstrap(settings), _reason(errors, exc, timeout_s)) from None
    return len(meta.brokers)


def _refused(servers: str, timeout_s: float) -> str:
    """Why no bootstrap server can be reached at all, or "" when one might be.

    One TCP connection attempt per ``host:port``: when every one is refused, or its host does
    not resolve, no Kafka client could do better, so the probe fails at once instead of after
    its timeout. A connection that hangs (a firewall dropping packets), and any server that
    accepts, leave the answer to the metadata request.

    >>> _refused("127.0.0.1:1", 1.0)
    'Connect to 127.0.0.1:1 failed: Connection refused'
    >>> _refused("no-such-host.invalid:9092", 1.0)
    'Failed to resolve no-such-host.invalid:9092'
    """
    reasons = []
    for server in [s.strip() for s in servers.split(",") if s.strip()]:
        host, _, port = server.rpartition(":")
        host = host.strip("[]") or "localhost"
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return ""
        except ConnectionRefusedError:
            reasons.append(f"Connect to {server} failed: Connection refused")
        except socket.gaierror:
            reasons.append(f"Failed to resolve {server}")
        except (OSError, ValueError):
            return ""  # a timeout, an unreachable route or an odd address: let librdkafka say
    return "; ".join(reasons)


def _reason(errors: list[Any], exc: Exception, timeout_s: float) -> str:
    """The most telling of librdkafka's errors: a connection failure, else the exception."""
    texts = [e.str() if hasattr(e, "str") else str(e) for e in errors]
    for text in [t for t in texts if "brokers are down" not in t] + texts:
        text = text.split("/bootstrap: ", 1)[-1]  # "host:port/bootstrap: Connect to ..."
        return re.sub(r" \(after \d+ms in state \w+\)$", "", text)
    detail = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
    return f"no answer within {timeout_s:g} s ({detail})"


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


def commit_lost_to_rebalance(exc: BaseException) -> bool:
    """Whether ``exc`` is an offset commit that a rebalance made void: the group moved on
    (``CommitFailedError``, a stale generation or member id, a rebalance in progress) or the
    partitions were taken away meanwhile (``IllegalStateError``: "No partitions assigned",
    "Partition ... is not assigned")."""
    from aiokafka.errors import (
        CommitFailedError,
        IllegalGenerationError,
        IllegalStateError,
        RebalanceInProgressError,
        UnknownMemberIdError,
    )

    lost = (
        CommitFailedError,
        IllegalStateError,
        IllegalGenerationError,
        RebalanceInProgressError,
        UnknownMemberIdError,
    )
    return isinstance(exc, lost)


def abandon_commit(consumer: str, exc: BaseException) -> None:
    """Log and count an offset commit given up (``dpstream_commits_lost_total``).

    Safe for every consumer of the worker: processing is at least once and the release protocol
    makes a replayed record harmless, so the records after the last commit that did land are
    read again (by this consumer once it rejoins, or by the partition's next owner) and a later
    commit goes further.
    """
    from app import metrics

    reason = "rebalance" if commit_lost_to_rebalance(exc) else type(exc).__name__
    metrics.COMMITS_LOST.labels(consumer, reason).inc()
    _LOG.warning(
        "%s: offset commit abandoned (%s: %s); the records since the last commit are read again",
        consumer,
        type(exc).__name__,
        " ".join(str(exc).split())[:160],
    )
