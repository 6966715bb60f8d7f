"""``dpstream replay``: a stream run offline over a file of events, exactly as the service.

- :mod:`~app.tools.replay.read`: CSV and JSON-lines rows, any time zone, bad rows named;
- :mod:`~app.tools.replay.run`: the rows through the collect stage's
  :class:`~app.stream.collect.events.Collector` and the release stage's
  :func:`~app.stream.release.central.step_slot`, with the service's noise derivation;
- :mod:`~app.tools.replay.summary`: the utility against the exact histograms;
- :mod:`~app.tools.replay.command`: the verb's handler.

Kinds: every stream the service releases centrally (labels, sums, levels, period mechanisms).
An open-domain stream (``domain: open``, :mod:`app.dp.open`) plugs in as one more kind once the
service runs it: :func:`~app.tools.replay.run.check_replayable` admits it, :class:`Replay`
takes its collector and step from the service as it does here (the slot's key -> count map in,
the released map out), :class:`~app.tools.replay.run.Released` carries the map, and
:class:`~app.tools.replay.summary.Utility` adds the keys' top-k recall and precision. The reader,
the ordering and the block-by-block closing do not change.
"""
