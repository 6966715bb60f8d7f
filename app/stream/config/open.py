"""The streams file's open-domain entries (``domain: open``, issue 36): their own keys and rules.

An open stream counts keys nobody listed (URLs, product ids, search terms)::

      - id: urls
        domain: open              # instead of labels / d
        max_keys: 1               # distinct keys a user contributes per slot (default 1)
        max_key_chars: 256        # a longer key is dead-lettered, reason key_too_long
        retire_after: 16          # public keys retire after this many quiet releases
        max_released_keys: 128    # most keys one release shows (default)
        mechanism: open_uniform   # or open_pba
        levels: [{name: std, w: 10, eps: 1.0, delta: 1.0e-6, population: 5000}]

Every level needs a ``delta`` (its window's, besides ``eps``); the mechanism
(:mod:`app.dp.open`) is built at load, so its own validation refuses a delta above
:data:`app.dp.open.MAX_DELTA` or a selection threshold above the population (the levels'
populations together). Open streams are central only, count users (no ``sum``), take no
``labels``, ``d``, ``graph`` or ``max_values`` (``max_keys`` is their bound), and draw the exact
discrete noise of :mod:`app.dp.open` (no ``noise: laplace``).

``max_released_keys`` caps the keys one release shows, public and new together (the largest
released counts are kept: post-processing, :func:`app.dp.open.base.top_keys`). The largest slot
it allows, its release record and the ledger entry holding it, must fit one message of
:data:`app.stream.topics.MAX_MESSAGE_BYTES`: the release wing measures it with the service's
encoders when the worker starts and refuses a cap that does not fit
(:func:`app.stream.release.open.check_sizes`, one :class:`ConfigError` line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.dp.open.base import MAX_RELEASED_KEYS
from app.stream.errors import ConfigError

OPEN_KEYS = frozenset({"domain", "max_keys", "max_key_chars", "retire_after", "max_released_keys"})
"""The stream keys of the open domain (``domain: labels`` streams may give only ``domain``)."""
NOT_OPEN = ("labels", "d", "graph", "sum", "max_values")
"""Stream keys an open stream refuses."""
OPEN_DEFAULTS = {
    "max_keys": 1,
    "max_key_chars": 256,
    "retire_after": 16,
    "max_released_keys": MAX_RELEASED_KEYS,
}
DEFAULT_MECHANISM = "open_uniform"


def check_open(where: str, raw: Mapping[str, Any], mode: str, noise: str) -> None:
    """Refuse what an open stream cannot take (one :class:`ConfigError` line)."""
    if mode != "central":
        raise ConfigError(f"{where}.domain: open streams are central only, not mode: {mode}")
    for key in NOT_OPEN:
        if key in raw:
            raise ConfigError(f"{where}.{key}: not for domain: open (keys are the values)")
    if noise != "geometric":
        raise ConfigError(
            f"{where}.mechanism.noise: open streams draw exact discrete noise; remove "
            f"`noise: {noise}`"
        )
    levels = raw.get("levels")
    for i, level in enumerate(levels if isinstance(levels, list) else []):
        if isinstance(level, dict) and "delta" not in level:
            raise ConfigError(
                f"{where}.levels[{i}] ({level.get('name')}): an open stream's level needs "
                "`delta` (its window's delta, at most 1e-3)"
            )


def check_labels(where: str, raw: Mapping[str, Any]) -> None:
    """Refuse the open-domain keys on a labels stream."""
    found = sorted((OPEN_KEYS - {"domain"}) & set(map(str, raw)))
    if found:
        raise ConfigError(f"{where}: {found} apply to domain: open streams only")
    levels = raw.get("levels")
    for i, level in enumerate(levels if isinstance(levels, list) else []):
        if isinstance(level, dict) and "delta" in level:
            raise ConfigError(
                f"{where}.levels[{i}] ({level.get('name')}).delta: only domain: open streams "
                "take a delta (a labels stream is eps-DP)"
            )
