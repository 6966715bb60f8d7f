"""What a public record that breaks its layout raises."""

from __future__ import annotations

from app.dp.errors import DPError

REASONS = (
    "undecodable",
    "not_a_map",
    "missing_field",
    "wrong_type",
    "unknown_stream",
    "out_of_domain",
    "bad_time",
    "key_mismatch",
    "wrong_partition",
    "bad_amount",
    "too_large",
    "key_too_long",
)
"""Every dead-letter reason; the ``reason`` label of ``dpstream_dead_letters``."""


class BadEvent(DPError):
    """One input message is unusable. The worker routes it to ``dead-letter`` and goes on.

    Nothing to do in the service; ``reason`` (one of :data:`REASONS`) tells the producer of the
    message what to fix.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class BadRecordError(ValueError):
    """A record the service wrote (release, audit, collection request) that does not follow
    its documented layout."""


class NewerSchemaError(ValueError):
    """A record written in a layout newer than its codec's ``VERSION``: upgrade the reader
    (guessing at new fields could misread a histogram)."""
