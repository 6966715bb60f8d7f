"""Open-domain streams: histograms over keys nobody listed, with DP key selection (issue 36).

How a slot moves through the wing:

- :mod:`~app.dp.open.bounding`: the slot's events ``(user, key)`` are bounded to ``max_keys``
  distinct keys per user (a keyed-hash order per user and slot) and counted per key;
- :mod:`~app.dp.open.public`: the keys released before are public; their counts are released
  at every slot, and quiet ones retire;
- :mod:`~app.dp.open.threshold`: new keys pass a threshold on their noisy count, chosen so a key
  one user holds shows with probability at most the slot's delta (exact discrete Laplace);
- :mod:`~app.dp.open.ledger`: each slot's (eps, delta) per level on a w-window ledger;
- the mechanisms: :class:`OpenUniform` (eps/w, delta/w per slot) and :class:`OpenPBA`
  (selection every slot, budget absorption over the public keys per level);
- :mod:`~app.dp.open.release`: the key -> count release of a slot.

These mechanisms are not in :mod:`app.dp.registry`: the shared conformance suite drives count
vectors of a fixed length ``d``, and their own conformance module (``tests/dp/open``) runs the
suite's generic checks through :mod:`~app.dp.open.checks`. ``docs/open-domain.md`` has the design.
"""

from __future__ import annotations

from app.dp.open.absorption import OpenPBA
from app.dp.open.base import OpenMechanism
from app.dp.open.ledger import MAX_DELTA, Level, OpenLedger
from app.dp.open.release import OpenRelease
from app.dp.open.uniform import OpenUniform

__all__ = [
    "MAX_DELTA",
    "Level",
    "OpenLedger",
    "OpenMechanism",
    "OpenPBA",
    "OpenRelease",
    "OpenUniform",
]
