"""The public keys of an open-domain stream: released before, so released at every slot.

A key that a slot released is public from the next slot on: whether it was released is a
function of a release the ledger already paid for, so using it is post-processing. A public key's
noisy count is released at every later slot whether or not any user sent it (leaving it out when
nobody sent it would disclose exactly that). A public key is retired when its released counts
stayed below the slot's selection threshold for ``retire_after`` consecutive slots: again a
function of released values only, so retiring is post-processing too, and it bounds the set.

A release shows at most ``max_released_keys`` keys (:func:`app.dp.open.base.top_keys`); the
public keys it leaves out retire at once (a function of released counts, post-processing), so
the set never holds more keys than that cap.

State: the keys (sorted), the last released count of each, and each key's quiet streak. Memory
is one entry per public key, at most the cap.

>>> import numpy as np
>>> p = PublicKeys()
>>> p.admit(np.array(["b", "a"]), np.array([9, 4]))
>>> p.keys.tolist(), p.last.tolist()
(['a', 'b'], [4, 9])
>>> p.match(np.array(["a", "c"]), np.array([3, 5]))[0].tolist()
[3, 0]
>>> p.settle(np.array([1, 9]), threshold=5, retire_after=1)
('a',)
>>> p.keys.tolist()
['b']
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp.types import IntArray

Keys = npt.NDArray[np.str_]


class PublicKeys:
    """The public key set, its last released counts and quiet streaks (numpy, sorted)."""

    def __init__(self) -> None:
        self.keys: Keys = np.array([], dtype=np.str_)
        self.last: IntArray = np.zeros(0, dtype=np.int64)
        self.quiet: IntArray = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.keys.size)

    def match(self, keys: Keys, counts: IntArray) -> tuple[IntArray, npt.NDArray[np.bool_]]:
        """The true count of every public key in a slot whose distinct keys are ``keys``
        (sorted) with ``counts`` (0 for a public key nobody sent), and which of ``keys`` are
        public."""
        pos = np.searchsorted(self.keys, keys)  # the public keys are distinct: a key is one
        hit = np.searchsorted(self.keys, keys, side="right") > pos  # of them iff it spans one
        out = np.zeros(self.keys.size, dtype=np.int64)
        out[pos[hit]] = counts[hit]
        return out, hit

    def settle(
        self,
        released: IntArray,
        threshold: int,
        retire_after: int,
        kept: npt.NDArray[np.bool_] | None = None,
    ) -> tuple[str, ...]:
        """Record the counts released for the public keys at this slot; retire the keys quiet
        (released below ``threshold``) for ``retire_after`` slots in a row, and those not
        ``kept`` (the release's cap left them out); return them (sorted)."""
        self.last = released.astype(np.int64)
        self.quiet = np.where(released < threshold, self.quiet + 1, 0)
        gone = self.quiet >= retire_after
        if kept is not None:
            gone |= ~kept
        retired = tuple(str(k) for k in self.keys[gone])
        keep = ~gone
        self.keys, self.last, self.quiet = self.keys[keep], self.last[keep], self.quiet[keep]
        return retired

    def admit(self, keys: Keys, released: IntArray) -> None:
        """Make newly selected ``keys`` (none of them public) public with their released
        counts."""
        merged = np.concatenate([self.keys, keys.astype(np.str_)])
        order = np.argsort(merged, kind="stable")
        self.keys = merged[order]
        self.last = np.concatenate([self.last, released.astype(np.int64)])[order]
        self.quiet = np.concatenate([self.quiet, np.zeros(keys.size, dtype=np.int64)])[order]

    def state_dict(self) -> dict[str, Any]:
        return {
            "keys": [str(k) for k in self.keys],
            "last": [int(x) for x in self.last],
            "quiet": [int(x) for x in self.quiet],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.keys = np.array(state["keys"], dtype=np.str_)
        self.last = np.array(state["last"], dtype=np.int64)
        self.quiet = np.array(state["quiet"], dtype=np.int64)
