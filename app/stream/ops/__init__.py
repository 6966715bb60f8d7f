"""The operations wing: what operators see, never exact figures about the data.

- :mod:`~app.stream.ops.http`: ``/metrics``, ``/healthz``, ``/readyz``, the status page;
- :mod:`~app.stream.ops.health`: event-loop saturation and the broker probe;
- :mod:`~app.stream.ops.status`: the status page and ``/budget``;
- :mod:`~app.stream.ops.budget_view` and :mod:`~app.stream.ops.ledger_view`: the budget view
  and ``dpstream ledger show``;
- :mod:`~app.stream.ops.late`: the slots in which values were dropped late;
- :mod:`~app.stream.ops.release_metrics`: the release stage's Prometheus figures.

The wing watches the others only through what :mod:`app.stream.worker` registers: release
listeners (:class:`~app.stream.release.protocol.ReleaseListener`) and the collect stages' late
signal; nothing in ``collect`` or ``release`` imports it.
"""
