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
3. the heavy users cover those needs: a maximum flow (source -> key, capacity its need; key ->
   heavy user who sent it, capacity 1; user -> sink, capacity ``max_keys``), by Dinic's
   algorithm. Whatever is left uncovered was counted beyond the bound (``key_bound``).

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
    (``max_keys``), by Dinic's algorithm (level graph by breadth-first search, then blocking
    flows by depth-first search; a few phases on a graph of unit middle edges)."""
    keys = list(wanted)
    users = [u for u, sent in heavy.items() if any(k in wanted for k in sent)]
    at = {k: i + 1 for i, k in enumerate(keys)}
    source, sink = 0, len(keys) + len(users) + 1
    net = _Network(sink + 1)
    for k in keys:
        net.add(source, at[k], wanted[k])
    for j, u in enumerate(users, start=len(keys) + 1):
        for k in heavy[u]:
            if k in at:
                net.add(at[k], j, 1)
        net.add(j, sink, max_keys)
    return net.max_flow(source, sink)


class _Network:
    """A flow network on nodes ``0 .. n - 1``: edges in flat lists (a reverse edge beside each)."""

    def __init__(self, n: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[int] = []

    def add(self, a: int, b: int, cap: int) -> None:
        self.adj[a].append(len(self.to))
        self.to.append(b)
        self.cap.append(cap)
        self.adj[b].append(len(self.to))
        self.to.append(a)
        self.cap.append(0)

    def max_flow(self, s: int, t: int) -> int:
        flow = 0
        while True:
            level = self._levels(s)
            if level[t] < 0:
                return flow
            nxt = [0] * len(self.adj)
            while pushed := self._push(s, t, level, nxt):
                flow += pushed

    def _levels(self, s: int) -> list[int]:
        level = [-1] * len(self.adj)
        level[s] = 0
        queue = deque([s])
        while queue:
            v = queue.popleft()
            for e in self.adj[v]:
                w = self.to[e]
                if self.cap[e] > 0 and level[w] < 0:
                    level[w] = level[v] + 1
                    queue.append(w)
        return level

    def _push(self, s: int, t: int, level: list[int], nxt: list[int]) -> int:
        """One augmenting path in the level graph (iterative depth-first search, each node's
        edges tried once per phase), applied; 0 when the phase's flow is blocking."""
        path: list[int] = []  # edges from s
        v = s
        while True:
            if v == t:
                pushed = min(self.cap[e] for e in path)
                for e in path:
                    self.cap[e] -= pushed
                    self.cap[e ^ 1] += pushed
                return pushed
            edges = self.adj[v]
            while nxt[v] < len(edges):
                e = edges[nxt[v]]
                w = self.to[e]
                if self.cap[e] > 0 and level[w] == level[v] + 1:
                    break
                nxt[v] += 1
            else:
                if v == s:
                    return 0
                level[v] = -1  # a dead end: never again this phase
                e = path.pop()
                v = self.to[e ^ 1]
                nxt[v] += 1
                continue
            path.append(edges[nxt[v]])
            v = self.to[edges[nxt[v]]]
