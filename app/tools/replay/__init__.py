"""``dpstream replay``: a stream run offline over a file of events, exactly as the service.

- :mod:`~app.tools.replay.read`: CSV and JSON-lines rows, any time zone, bad rows named;
- :mod:`~app.tools.replay.run`: the rows through the collect stage's
  :class:`~app.stream.collect.events.Collector` and the release stage's
  :func:`~app.stream.release.central.step_slot`, with the service's noise derivation;
- :mod:`~app.tools.replay.summary`: the utility against the exact histograms;
- :mod:`~app.tools.replay.command`: the verb's handler.

- :mod:`~app.tools.replay.open`: an open-domain stream (``domain: open``): the same collector
  (its keyed ``max_keys`` bound) and the release agent's ``step_counts``, key -> count maps.

Kinds: every stream the service releases centrally (labels, sums, levels, period mechanisms,
open-domain). The reader, the ordering and the block-by-block closing are shared.
"""
