"""The collect wing: batch consumers of ``events`` (central) and ``reports`` (local).

- :mod:`~app.stream.collect.batch`: :class:`BatchConsumer`, what both consumers share;
- :mod:`~app.stream.collect.ingest` and :mod:`~app.stream.collect.events`: the events ingest
  and its pure bookkeeping (slots, one value per user per slot, progress, counts per group);
- :mod:`~app.stream.collect.preferences`: the ``preferences`` and ``levels`` topics read into
  users' level histories (the change gap rule is the core's, :mod:`app.dp.levels`);
- :mod:`~app.stream.collect.reports` and :mod:`~app.stream.collect.tally`: the reports
  consumer and its per-round tallies;
- :mod:`~app.stream.collect.partitioning`: which partition a user's key belongs to;
- :mod:`~app.stream.collect.policy`: what happens to bad input (dead letters).
"""
