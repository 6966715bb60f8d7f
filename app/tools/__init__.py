"""Tools that sit on top of the service and the SDK: the demo, the embedded broker, the device
simulator, the synthetic producer and the capacity benchmarks (:mod:`app.tools.capacity`).

Nothing below imports this package: ``app.dp`` is the pure core; ``app.stream`` (the service),
``app.client`` (the device SDK) and ``app.bench`` (offline replay) import ``app.dp`` only (and
``app.stream`` its metrics); ``app.tools`` may import all of them. Its verbs (``demo``,
``produce``, ``simulate devices``) are registered by :mod:`app.tools.cli`, ``capacity ...`` by
:mod:`app.tools.capacity.cli`.

Modules are imported on demand (Kafka clients and the broker launcher are heavy), so this
package exposes their names only.
"""

from __future__ import annotations

__all__ = ["capacity", "cli", "demo", "produce", "releases", "simulator"]
