"""``dpstream verify``: a per-user accountant over the topics (docs/design.md invariant 6).

It reads what a deployment wrote and recomputes, independently of the worker's classes, where
every value had to count and what every user spent, then judges:

- :mod:`app.verify.read`: a snapshot of the topics (outputs before inputs, each to its end);
- :mod:`app.verify.rules`: the slot and level rules, restated on their own;
- :mod:`app.verify.account`: the central accountant (values, groups, partials, releases, users);
- :mod:`app.verify.local`: the local accountant (every device's answers against its window);
- :mod:`app.verify.open`: the open-domain accountant (``max_keys`` per user through
  :mod:`app.verify.bound`, and every window's eps and delta per user);
- :mod:`app.verify.windows`: per-user window spend and two-groups checks, vectorized;
- :mod:`app.verify.verdict`: what it finds; :mod:`app.verify.report`: text and JSON;
- :mod:`app.verify.run`: read + judge as one call; :mod:`app.verify.cli`: the verb.

Data flows read -> account (or local) -> verdict -> report.
"""

from __future__ import annotations

from typing import Any

__all__ = ["judge", "verify"]


def __getattr__(name: str) -> Any:
    """``judge`` and ``verify`` from :mod:`app.verify.run`, imported on first use: the CLI
    builds its parser from :mod:`app.verify.cli` without loading numpy."""
    if name in __all__:
        from app.verify import run

        return getattr(run, name)
    raise AttributeError(name)
