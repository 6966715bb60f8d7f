"""Could a slot's open-domain partial have come from users who each kept at most ``max_keys``?

An open stream's collect stage keeps, per user and slot, at most ``max_keys`` distinct keys of
those the user sent, each once, by a secret keyed order (``docs/open-domain.md``). Its partial
for a ``(slot, partition)`` is a key -> count map. Without the secret, ``verify`` cannot say
*which* keys each user kept, but it can say whether *any* choice within the bound explains the
map: each key's count is covered by distinct users who sent that key, and no user covers more
than ``max_keys`` keys. That is a flow problem, and its answer is exact (no false alarm, and a
count beyond the bound is always caught):

1. a key counted more often than users sent it is an ``overcount`` (nobody could explain it);
2. a *light* user (at most ``max_keys`` distinct keys) can be taken to cover all of its keys: in
   any explanation, a light user left out of a key it sent can replace whoever covers that key
   (a heavy user then only frees capacity). So each key needs ``max(0, count - light senders)``
   from the *heavy* users;
3. the heavy users cover those needs by augmenting paths (source -> key, capacity its need;
   key -> heavy user who sent it, capacity 1; user -> sink, capacity ``max_keys``). Whatever is
   left uncovered was counted beyond the bound (``key_bound``).

>>> need = feasible({"a": 1, "b": 1}, {"u": {"a", "b"}}, max_keys=1)
>>> need.overcount, need.beyond
({}, 1)
>>> feasible({"a": 2, "b": 1}, {"u": {"a", "b"}, "v": {"a"}}, max_keys=1).beyond
1
>>> feasible({"a": 1, "b": 1}, {"u": {"a", "b"}, "v": {"a", "b"}}, max_keys=1).beyond
0
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Need:
    """What a partial asks beyond what its slot's users could explain."""

    overcount: dict[str, int] = field(default_factory=dict)
    """Keys counted more often than distinct users sent them, and by how much."""
    beyond: int = 0
    """Counts no assignment within ``max_keys`` keys per user explains (the rest fits)."""
    heavy: tuple[str, ...] = ()
    """Users who sent more than ``max_keys`` distinct keys: only they could have been counted
    beyond the bound."""


def feasible(counts: Mapping[str, int], sent: Mapping[str, set[str]], max_keys: int) -> Need:
    """Judge one partial ``counts`` (key -> count) against ``sent`` (user -> the distinct keys
    the user sent in the slot, in the partition)."""
    senders: dict[str, int] = {}
    light: dict[str, int] = {}
    heavy = {u: keys for u, keys in sent.items() if len(keys) > max_keys}
    for user, keys in sent.items():
        for k in keys:
            senders[k] = senders.get(k, 0) + 1
            if user not in heavy:
                light[k] = light.get(k, 0) + 1
    need = Need(heavy=tuple(sorted(heavy)))
    wanted: dict[str, int] = {}
    for key, c in counts.items():
        c = int(c)
        over = c - senders.get(key, 0)
        if over > 0:
            need.overcount[key] = over
            c -= over
        rest = c - light.get(key, 0)
        if rest > 0:
            wanted[key] = rest
    if wanted:
        need.beyond = sum(wanted.values()) - _cover(wanted, heavy, max_keys)
    return need


def _cover(wanted: dict[str, int], heavy: Mapping[str, set[str]], max_keys: int) -> int:
    """Max flow of source -> key (``wanted``) -> heavy user who sent it (1) -> sink
    (``max_keys``), by breadth-first augmenting paths (Edmonds-Karp on a unit graph)."""
    holders: dict[str, list[str]] = {k: [] for k in wanted}
    for user, keys in heavy.items():
        for k in keys:
            if k in holders:
                holders[k].append(user)
    left = dict(wanted)  # residual capacity source -> key
    load = dict.fromkeys(heavy, 0)  # flow user -> sink
    covers: dict[str, set[str]] = {u: set() for u in heavy}  # flow key -> user (one unit)
    flow = 0
    while _augment(left, holders, covers, load, max_keys):
        flow += 1
    return flow


def _augment(
    left: dict[str, int],
    holders: Mapping[str, list[str]],
    covers: dict[str, set[str]],
    load: dict[str, int],
    max_keys: int,
) -> bool:
    """One augmenting path from the source to the sink, applied; False when there is none.

    Nodes: keys (reached from the source while their need is left, or backwards from a user
    covering them) and users (reached from a key they sent and do not cover yet)."""
    by_key: dict[str, str | None] = {}
    by_user: dict[str, str] = {}
    queue: deque[tuple[str, str]] = deque()
    for key, rest in left.items():
        if rest > 0:
            by_key[key] = None
            queue.append(("k", key))
    while queue:
        kind, node = queue.popleft()
        if kind == "k":
            for user in holders.get(node, ()):
                if user in by_user or node in covers[user]:
                    continue
                by_user[user] = node
                if load[user] < max_keys:
                    _apply(user, by_key, by_user, left, covers, load)
                    return True
                queue.append(("u", user))
        else:
            for key in covers[node]:  # undo one of the user's covers: a backward edge
                if key not in by_key:
                    by_key[key] = node
                    queue.append(("k", key))
    return False


def _apply(
    user: str,
    by_key: dict[str, str | None],
    by_user: dict[str, str],
    left: dict[str, int],
    covers: dict[str, set[str]],
    load: dict[str, int],
) -> None:
    """Push one unit along the path found: it ends at ``user`` (who gains a cover) and walks
    back through keys handed from one user to the next, to a key whose need it lowers."""
    load[user] += 1
    while True:
        key = by_user[user]
        covers[user].add(key)
        previous = by_key[key]
        if previous is None:
            left[key] -= 1
            return
        covers[previous].discard(key)
        user = previous
