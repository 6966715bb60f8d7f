"""The shared slot protocol of the open-domain mechanisms (:mod:`app.dp.open`).

One slot, in order:

1. plan the slot's spending per level (eps units, delta units) and check it on the ledger
   before any draw (:meth:`OpenMechanism._plan`);
2. bound contributions: offline, :meth:`OpenMechanism.step` draws the slot's bounding salt from
   ``rng`` and bounds the events (:func:`app.dp.open.bounding.bound`); the service bounds at
   ingest, per partition, with a per-slot salt of its own, and hands the bounded per-key
   counts to :meth:`OpenMechanism.step_counts`, which is steps 1 and 3-5 (``step`` is
   ``bound`` + ``step_counts`` on the same generator, so both run one path);
3. split the slot's distinct keys into public ones (their true counts, 0 for the public keys
   nobody sent) and new candidates (true count >= 1), in the keys' canonical (hash, string)
   order (:func:`app.dp.open.bounding.distinct_keys`): the noise a key gets never depends on
   how the counts reached the mechanism (one batch, or partitions merged in any order);
4. the subclass noises the public counts and selects new keys (:meth:`OpenMechanism._slot`);
5. record what was spent; cap the release at ``max_released_keys`` keys (:func:`top_keys`);
   the public keys' released counts settle their quiet streaks (retiring the quiet ones and
   those the cap left out), and the selected keys the cap kept become public.

Nothing the release shows depends on the data except through noisy counts: the keys are
sorted, and a key absent from the public set is shown only when its noisy count passed the
threshold.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from app.dp import validate
from app.dp.budget import exact
from app.dp.errors import ParameterError
from app.dp.interfaces import GraphWindow, LevelUse, PopulationWindow
from app.dp.mechanism import Mechanism
from app.dp.open.bounding import Bounded, bound, merge_counts
from app.dp.open.ledger import Level, OpenLedger, levels
from app.dp.open.public import Keys, PublicKeys
from app.dp.open.release import OpenRelease, OpenWindowSpend
from app.dp.open.threshold import rate, threshold
from app.dp.types import IntArray, Status, WindowSpend

SHARE = 1 << 40
"""One ledger share ``eps_i / (2 w_i)`` (or ``delta_i / (2 w_i)``) in units (app.dp.budget)."""
MAX_RELEASED_KEYS = 128
"""The default cap on the keys one release shows (public and new together): the service's
worst slot at the default ``max_key_chars`` (256, every character 4 UTF-8 bytes) holds about
180 in one 1,000,000-byte message (``app.stream.release.open``)."""
UNCAPPED = 10**9
"""``max_released_keys`` that shows every selected key: for the audit and the bench, which
measure the selection and the counts before the cap (the cap, a function of the release, only
hides keys; the service always runs a cap that fits one message)."""


@dataclass(frozen=True)
class Plan:
    """Per level, the most a slot may spend: eps units and delta units."""

    eps: list[int]
    delta: list[int]


@dataclass(frozen=True)
class Outcome:
    """What a subclass decided for one slot."""

    public: IntArray
    """Released counts of the public keys (fresh or repeated), aligned with the public set."""
    selected: npt.NDArray[np.bool_]
    """Which new candidates were selected."""
    released: IntArray
    """Released counts of the selected candidates."""
    status: Status
    spent: Plan
    """What the slot spent (at most the plan)."""


class OpenMechanism(Mechanism):
    """Base of the open-domain mechanisms; see the module docstring."""

    def __init__(
        self,
        levels: Sequence[Level],
        population: int,
        max_keys: int = 1,
        sensitivity: int = 1,
        retire_after: int = 16,
        max_key_chars: int = 256,
        selection_share: float = 1.0,
        max_released_keys: int = MAX_RELEASED_KEYS,
    ) -> None:
        self.levels = _levels(levels)
        self.population = validate.integer("population", population)
        self.max_keys = validate.integer("max_keys", max_keys)
        self.sensitivity = validate.integer("sensitivity", sensitivity, high=3)
        self.retire_after = validate.integer("retire_after", retire_after)
        self.max_key_chars = validate.integer("max_key_chars", max_key_chars, high=4097)
        self.selection_share = validate.number(
            "selection_share", selection_share, 0.0, strict=True, high=1.0
        )
        self.max_released_keys = validate.integer("max_released_keys", max_released_keys)
        self.units = self.sensitivity * self.max_keys
        """``Delta``: L1 sensitivity of a slot's count vector, and the number of keys only the
        changed user may hold on either side (the singletons the delta covers)."""
        self.tau = self._threshold()
        if self.tau > self.population:
            raise ParameterError(
                f"population={self.population} is below the selection threshold {self.tau}: "
                "no key could ever be released; raise eps or delta, or lower max_keys"
            )
        self._reset()

    def _reset(self) -> None:
        self.t = 0
        self.ledger = OpenLedger(self.levels)
        self.public = PublicKeys()

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        return {
            "levels": [Level(4, 4.0, 1e-3), Level(2, 2.0, 5e-4)],
            "population": 10**4,
            "max_keys": 2,
        }

    # -- what a subclass decides --------------------------------------------------------------
    def selection_budget(self) -> tuple[Fraction, Fraction]:
        """(eps, delta) of one slot's selection, the same at every slot: the strictest level's
        per-slot share (drawing at the minimum over levels is within every level's share)."""
        plan = self._selection_units()
        eps = min(self.ledger.eps_of(i, plan.eps[i]) for i in range(len(self.levels)))
        delta = min(self.ledger.delta_of(i, plan.delta[i]) for i in range(len(self.levels)))
        return eps, delta

    def _threshold(self) -> int:
        probe = OpenLedger(self.levels)
        plan = self._selection_units()
        eps = min(probe.eps_of(i, plan.eps[i]) for i in range(len(self.levels)))
        delta = min(probe.delta_of(i, plan.delta[i]) for i in range(len(self.levels)))
        return threshold(rate(eps, self.units), delta, self.units)

    @abstractmethod
    def _selection_units(self) -> Plan:
        """Per level, the eps and delta units one slot's selection draw spends."""

    @abstractmethod
    def _plan(self, t: int) -> Plan:
        """Per level, the most slot ``t`` may spend (checked before any draw)."""

    @abstractmethod
    def _slot(
        self, t: int, public: IntArray, candidates: IntArray, rng: np.random.Generator
    ) -> Outcome:
        """Decide slot ``t`` from the public keys' true counts and the candidates' (>= 1)."""

    # -- the protocol ---------------------------------------------------------------------------
    def step(
        self, users: npt.ArrayLike, keys: npt.ArrayLike, rng: np.random.Generator
    ) -> OpenRelease:
        """Release one slot from its events: ``users[i]`` sent ``keys[i]`` (not modified).

        The plan is checked before the salt is drawn, so a refused slot draws nothing."""
        plan = self._plan(self.t + 1)
        self.ledger.ensure(plan.eps, plan.delta)  # 1. check before any draw
        salt = int(rng.integers(0, 2**63))  # 2. bound
        bounded: Bounded = bound(users, keys, self.max_keys, salt, self.max_key_chars)
        return self.step_counts(bounded.keys, bounded.counts, rng)

    def step_counts(
        self, keys: npt.ArrayLike, counts: npt.ArrayLike, rng: np.random.Generator
    ) -> OpenRelease:
        """Release one slot from its *bounded* counts: ``counts[i]`` users kept ``keys[i]``.

        The caller bounded the slot (each user at most ``max_keys`` distinct keys, each once;
        :func:`app.dp.open.bounding.bound`): the privacy argument of the class holds for these
        counts only. A key may appear several times (partials of several partitions, rows of
        several levels): its counts are summed. Keys with a zero total are dropped (a public
        key's zero is filled in by the public set). Inputs are not modified."""
        t = self.t + 1
        plan = self._plan(t)
        self.ledger.ensure(plan.eps, plan.delta)  # 1. check before any draw
        distinct, totals = merge_counts(keys, counts, self.max_key_chars)
        public, hit = self.public.match(distinct, totals)  # 3. split
        new_at = np.flatnonzero(~hit)  # the candidates' places: no copy of their keys
        out = self._slot(t, public, totals[new_at], rng)  # 4. decide
        self.ledger.record(out.spent.eps, out.spent.delta)  # 5. record, cap, settle, admit
        self.t = t
        old_keys = self.public.keys
        chosen: Keys = distinct[new_at[out.selected]]
        merged = np.concatenate([old_keys, chosen])
        shown = np.concatenate([out.public, out.released])
        kept = top_keys(merged, shown, self.max_released_keys)
        old_kept, new_kept = kept[: old_keys.size], kept[old_keys.size :]
        retired = self.public.settle(out.public, self.tau, self.retire_after, old_kept)
        self.public.admit(chosen[new_kept], out.released[new_kept])
        new = np.concatenate([np.zeros(old_keys.size, bool), np.ones(chosen.size, bool)])[kept]
        merged, shown = merged[kept], shown[kept]
        order = np.argsort(merged, kind="stable")
        return OpenRelease(
            slot=t,
            keys=tuple(str(k) for k in merged[order]),
            counts=shown[order],
            new=new[order],
            fresh=out.status == "publish",
            status=out.status,
            threshold=self.tau,
            retired=retired,
            eps_spent=tuple(self.ledger.eps_of(i, u) for i, u in enumerate(out.spent.eps)),
            delta_spent=tuple(self.ledger.delta_of(i, u) for i, u in enumerate(out.spent.delta)),
            mechanism=self.name,
            version=self.version,
        )

    def spent(self) -> list[tuple[Fraction, Fraction]]:
        """Per level, (eps, delta) spent in the window of ``w`` slots ending at the last slot."""
        return [self.ledger.spent(i) for i in range(len(self.levels))]

    def window_report(self) -> list[WindowSpend]:
        """Per level, the eps and the delta spent in its window of ``w`` slots ending at the
        last slot (:class:`OpenWindowSpend`: the service's budget views show both)."""
        out: list[WindowSpend] = []
        for i, level in enumerate(self.levels):
            eps, delta = self.ledger.spent(i)
            out.append(OpenWindowSpend(level.w, level.eps, eps, level.delta, delta))
        return out

    # the optional views of the service's ledger views (app.dp.interfaces.LedgerView): none
    def level_use(self) -> LevelUse | None:
        return None

    def population_window(self) -> PopulationWindow | None:
        return None

    def graph_window(self) -> GraphWindow | None:
        return None

    def share(self) -> Fraction:
        """``selection_share`` as the exact decimal the operator wrote."""
        return exact(self.selection_share)

    def _state(self) -> dict[str, Any]:
        return {"t": self.t, "ledger": self.ledger.state_dict(), "public": self.public.state_dict()}

    def _load(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.ledger.load_state(state["ledger"])
        self.public.load_state(state["public"])


def top_keys(keys: Keys, released: IntArray, cap: int) -> npt.NDArray[np.bool_]:
    """Which of a slot's released ``keys`` (distinct) the capped release keeps: all if there are
    at most ``cap``, else the ``cap`` of largest ``released`` count, ties by key (code point
    order). A function of the released keys and counts alone (post-processing).

    >>> top_keys(np.array(["a", "b", "c", "d"]), np.array([5, 9, 5, 1]), 2).tolist()
    [True, True, False, False]
    """
    kept = np.ones(keys.size, dtype=bool)
    if keys.size > cap:
        kept[np.lexsort((keys, -np.asarray(released, dtype=np.int64)))[cap:]] = False
    return kept


def _levels(value: Sequence[Any]) -> tuple[Level, ...]:
    try:
        return levels(value)
    except TypeError as exc:
        raise ParameterError(f"levels must be Level(w, eps, delta) items, got {value!r}") from exc
