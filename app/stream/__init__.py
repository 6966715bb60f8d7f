"""The Faust service: config, topics, records, the ingest hot path, the release agent, tools.

Central mode: ``events`` -> :mod:`app.stream.ingest` (collect, batched) -> ``partials`` ->
the ``release`` agent (:mod:`app.stream.release`, Faust + RocksDB tables) -> ``releases`` and
``audit``. See ``docs/service.md``.
"""

from __future__ import annotations

__all__: list[str] = []
