"""``dpstream bench open-domain`` (issue 36 §4): the open-domain mechanisms on key spaces
nobody listed, against the same budget with the key set known and against per-slot
thresholding without public keys.

- :mod:`~app.bench.open_domain.data`: slots of ``(user, key)`` events (T-Drive positions on a
  fine grid, Diginetica item ids, a generated Zipf stream for ``--quick``);
- :mod:`~app.bench.open_domain.measures`: top-k recall, precision, MAE over the union of keys;
- :mod:`~app.bench.open_domain.run`: the methods and the grid (rows);
- :mod:`~app.bench.open_domain.report`: tables, verdicts from the rows, the RESULTS.md section;
- :mod:`~app.bench.open_domain.plots`: the PNGs;
- :mod:`~app.bench.open_domain.cli`: the verb.
"""
