"""The pure DP core: mechanisms, noise, budgets and ledgers, with no I/O, clocks or Kafka.

Nothing in ``app.dp`` imports from the rest of ``app``. Mechanisms are built through
:mod:`app.dp.registry`, take an injected :class:`numpy.random.Generator`, and keep explicit,
msgpack-serializable state.
"""

from __future__ import annotations

__all__: list[str] = []
