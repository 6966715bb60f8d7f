"""The Faust service, in wings; ``docs/service.md`` tells the design.

Central mode::

    events ──▶ collect.ingest (Collector: slots, one value per user, levels) ──▶ partials
    partials ──▶ release (CentralDriver: close on progress, step, ledger) ──▶ releases, audit

Local mode::

    release (LocalDriver: rounds, requests) ──▶ collection-requests ──▶ devices ──▶ reports
    reports ──▶ collect.reports (tally per round) ──▶ partials ──▶ release ──▶ releases, audit

The wings:

- :mod:`app.stream.collect`: the batch consumers of the input topics (``batch``: what the
  events ingest and the reports tally share), what they count (``events``, ``tally``,
  ``preferences``), and how (``partitioning``, ``policy`` for bad input);
- :mod:`app.stream.release`: the release agent, its protocol, drivers and guard;
- :mod:`app.stream.ops`: what operators see (``http``, ``health``, ``status``, the budget and
  ledger views, ``late``);
- :mod:`app.stream.config`: the streams file and the environment.

Walls: ``ops`` may import ``release``, ``collect`` and ``config``; ``release`` and ``collect``
only ``config`` (they meet through ``internal`` and the core, :mod:`app.dp`); nothing imports
back up (``tests/tools/test_layering.py``, ``WING_ALLOWED``).

Shared by the wings: ``internal`` (the internal wire), ``records`` (the public wire),
``slots`` (slot arithmetic), ``topics``, ``kafka`` (client settings), ``errors``, ``broker``
(the embedded Tansu of the demo, the tests and the throughput bench); ``worker`` puts the wings
together, ``cli`` is the ``dpstream worker`` verb.
"""

from __future__ import annotations

__all__: list[str] = []
