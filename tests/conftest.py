"""The order in which the suite's files run: see :func:`pytest_collection_modifyitems`."""

from __future__ import annotations

from itertools import chain, zip_longest

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Alternate a file that mostly waits (one with an ``integration`` test: a broker, workers
    and wall-clock slots) with one that computes, each kind in its collection order; a file's
    tests stay together and in their order.

    ``scripts/test.sh`` runs the files on four processes (``-n 4 --dist loadfile
    --no-loadscope-reorder``), handed out in this order: about half the processes then wait on
    slots while the others keep the two cores busy, and the long integration files start early,
    the many short files filling the end. (xdist's own order, files with the most tests first,
    ran every computing file first on both cores and then every integration file with the cores
    mostly idle.)
    """
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    waits: list[list[pytest.Item]] = []
    computes: list[list[pytest.Item]] = []
    for tests in files.values():
        waiting = any(test.get_closest_marker("integration") for test in tests)
        (waits if waiting else computes).append(tests)
    pairs = zip_longest(waits, computes, fillvalue=[])
    items[:] = list(chain.from_iterable(chain.from_iterable(pairs)))
