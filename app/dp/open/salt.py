"""The service's contribution bound: the per-slot salt and the score of a ``(user, key)`` pair.

:mod:`app.dp.open.bounding` orders a user's keys by the score
``mix(key_hash(key) + mix(user ^ salt))`` and keeps the ``max_keys`` smallest; offline, the
users are integers and the salt a draw of the slot's generator. The service bounds at ingest,
per partition, before any noise is drawn, so it needs two things offline runs do not:

* a *salt per slot that every worker and every replay agrees on*, secret like the noise:
  :func:`slot_salt`, an HMAC-SHA256 under the deployment's noise key of the deployment, a tag
  of its own (so it is independent of the slot's noise generator, :func:`app.dp.noise.keyed_rng`),
  the stream id and the slot;
* a 64-bit word for a user id, which is text: :func:`user_words`, the same hash as the keys'
  (:func:`~app.dp.open.bounding.key_hash`), a function of the id alone.

:func:`scores` is then the score of :mod:`~app.dp.open.bounding` over those words. What a user
keeps depends on its own events and the salt only (the privacy argument,
``docs/open-domain.md``).

>>> a = slot_salt(b"k" * 32, "eu", "urls", 7)
>>> a == slot_salt(b"k" * 32, "eu", "urls", 7), a == slot_salt(b"k" * 32, "eu", "urls", 8)
(True, False)
>>> import numpy as np
>>> s = scores(np.array([3, 3], np.uint64), user_words(["ann", "bob"]), a)
>>> s.dtype, bool(s[0] != s[1])  # one key, two users: two independent-looking scores
(dtype('uint64'), True)
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError
from app.dp.open.bounding import key_hash, mix

TAG = b"dpstream/open-bound/v1"
"""Separates the salt's HMAC messages from the noise generator's (app.dp.noise.keyed_rng)."""

Words = npt.NDArray[np.uint64]


def slot_salt(key: bytes, deployment: str, stream: str, slot: int) -> int:
    """The bounding salt of one slot of one stream: a 64-bit word, the same for every worker,
    every replay and ``dpstream replay`` holding the same key; secret without the key."""
    if len(key) < 16:
        raise ParameterError(f"noise key must be at least 16 bytes, got {len(key)}")
    if slot < 0:
        raise ParameterError(f"slot must be >= 0, got {slot}")
    msg = b"\x00".join((TAG, deployment.encode(), stream.encode(), slot.to_bytes(8, "big")))
    return int.from_bytes(hmac.new(key, msg, hashlib.sha256).digest()[:8], "big")


def user_words(users: Sequence[str]) -> Words:
    """A 64-bit word of each user id: :func:`~app.dp.open.bounding.key_hash` of its text."""
    return key_hash(np.asarray(users, dtype=np.str_))


def scores(key_hashes: Words, users: Words, salt: int) -> Words:
    """The bounding order's score of each pair ``(users[i], key_hashes[i])`` under ``salt``:
    :mod:`~app.dp.open.bounding`'s ``mix(key_hash + mix(user ^ salt))``."""
    salt_word = np.uint64(salt & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        return mix(key_hashes + mix(users ^ salt_word))
