"""Offline replay and benchmarks: one folder per paper over one engine.

``app.bench.<paper>`` (``pwsm``, ``ldp_ids``, ``pldp``, ``optstream``, ``wn``) holds that paper's
runs, claims, renderers, plots and published numbers; :mod:`app.bench.engine` what they share
(datasets, grids, measures, the run store); :mod:`app.bench.report` writes RESULTS.md and
:mod:`app.bench.cli` is the front door (``dpstream bench <paper>``). ``app.bench`` builds
mechanisms only through :mod:`app.dp.registry` and records the seed and parameters of every run
in its outputs.
"""

from __future__ import annotations

__all__: list[str] = []
