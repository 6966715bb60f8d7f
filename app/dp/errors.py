"""The exceptions of the DP core; every dpstream error derives from :class:`DPError`."""

from __future__ import annotations


class DPError(Exception):
    """Root of every dpstream error. Catch this to handle any failure dpstream raises on purpose."""


class ParameterError(DPError, ValueError):
    """A mechanism, group or noise parameter is invalid.

    The message names the parameter and the value it got. Fix the configuration (the stream's
    YAML file or the arguments to ``create``) and start again.
    """


class InsufficientBudgetError(DPError):
    """A mechanism asked the ledger for more budget than a group's window still holds.

    This never happens with a correct mechanism: it is the ledger refusing to let a bug spend
    budget. No noise was drawn and nothing was released. Report it with the numbers it carries
    (group, spent in the window, requested, limit).
    """

    def __init__(self, group: int, spent: float, requested: float, limit: float, what: str) -> None:
        self.group = group
        self.spent = spent
        self.requested = requested
        self.limit = limit
        super().__init__(
            f"group {group}: {what} window already spent {spent:.6g}, requested {requested:.6g}, "
            f"limit {limit:.6g}"
        )


class StateMismatchError(DPError):
    """A saved mechanism state does not belong to this mechanism or these parameters.

    ``load_state`` refuses a blob written by another mechanism, another state version, or the
    same mechanism with other parameters. Restore the configuration the ledger was written with,
    or start the stream under a new id; never edit a ledger by hand.
    """
