"""The base of every mechanism: parameters, the state envelope, and the parameter fingerprint.

A mechanism keeps its constructor parameters verbatim and its evolving state apart.
:meth:`Mechanism.params` reads them back by the names of the constructor's signature (river's
``_get_params``), so a class declares its parameters once, in ``__init__``.
``state_dict()`` wraps the state in an envelope carrying the mechanism's name, its state
version and a fingerprint of its parameters; ``load_state`` refuses a blob whose envelope does
not match, so a ledger can never be continued by a differently configured mechanism.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from app.dp.errors import StateMismatchError
from app.dp.types import Group, WindowSpend

Kind = Literal["central", "local", "graph", "period"]


class Mechanism(ABC):
    """A w-event DP mechanism with explicit, msgpack-serializable state."""

    name: ClassVar[str]
    """Registry key (lowercase paper acronym)."""
    version: ClassVar[int]
    """Implementation and state version; bump it when outputs or state layout change."""
    kind: ClassVar[Kind]
    param_attrs: ClassVar[Mapping[str, str | None]] = {}
    """Constructor parameters stored under another attribute (name -> attribute), or folded
    into others and not reported (name -> None); every other one is stored under its name."""

    def params(self) -> dict[str, Any]:
        """The constructor parameters as plain values (what ``create`` was called with), in
        the order of the constructor's signature; groups as ``[w, eps]`` pairs."""
        out = {}
        for name in constructor_params(type(self)):
            attr = self.param_attrs.get(name, name)
            if attr is not None:
                out[name] = _plain(getattr(self, attr))
        return out

    @abstractmethod
    def describe(self) -> str:
        """One line: how the mechanism splits and spends budget."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """The evolving state as plain values."""

    @abstractmethod
    def _load(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_state` output onto a freshly built instance."""

    @classmethod
    def for_stream(cls, d: int, groups: Sequence[Group], **params: Any) -> Mechanism:
        """Build the mechanism a stream runs: its domain size, its requirement groups (the
        levels it offers) and its extra ``params``; how a service builds any mechanism."""
        build: Callable[..., Mechanism] = cls  # a concrete subclass's constructor
        return build(d=d, groups=groups, **params)

    @classmethod
    @abstractmethod
    def test_params(cls) -> dict[str, Any]:
        """Small parameters for the conformance suite (``app.dp.checks``)."""

    def window_report(self) -> list[WindowSpend]:
        """Per declared requirement group, the budget spent in its window of ``w`` slots
        ending at the last slot (what the service's budget gauges and audit records show)."""
        raise NotImplementedError(f"{self.name} does not report its window spending")

    def ledger_per_group(self) -> bool:
        """Whether every requirement group has a ledger of its own (a personalized mechanism);
        False: one ledger, at the strictest ``(max w, min eps)``, accounts for every group, so a
        user's level changes nothing it can lose (:mod:`app.dp.units`)."""
        return False

    def weaker_guarantee(self) -> str | None:
        """Why this configuration is *not* w-event private at its groups' ``(w, eps)`` (a
        papers' setting kept for reproducing them), or None when it is (the default)."""
        return None

    def fingerprint(self) -> str:
        """A short hash of the parameters; equal parameters give equal fingerprints."""
        text = json.dumps(self.params(), sort_keys=True, default=repr)
        return hashlib.sha256(f"{self.name}:{text}".encode()).hexdigest()[:16]

    def state_dict(self) -> dict[str, Any]:
        """The state in an envelope of plain values, ready for msgpack."""
        return {
            "mechanism": self.name,
            "version": self.version,
            "fingerprint": self.fingerprint(),
            "state": self._state(),
        }

    def load_state(self, blob: dict[str, Any]) -> None:
        """Continue from ``blob``; refuse one written by another mechanism or parameters."""
        for key, mine in (
            ("mechanism", self.name),
            ("version", self.version),
            ("fingerprint", self.fingerprint()),
        ):
            theirs = blob.get(key)
            if theirs != mine:
                raise StateMismatchError(f"state {key} is {theirs!r}, this mechanism has {mine!r}")
        self._load(blob["state"])

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


_SIGNATURES: dict[type, tuple[str, ...]] = {}


def constructor_params(cls: type) -> tuple[str, ...]:
    """The names of ``cls``'s constructor parameters. A constructor that passes ``**params``
    on takes its parent constructor's names too, the parent's first.

    >>> from app.dp.period import DFT
    >>> constructor_params(DFT)
    ('d', 'groups', 'noise', 'sensitivity', 'alpha', 'strict', 'k')
    """
    if cls not in _SIGNATURES:
        _SIGNATURES[cls] = _names(cls.__mro__)
    return _SIGNATURES[cls]


def _names(mro: tuple[type, ...]) -> tuple[str, ...]:
    owners = [i for i, klass in enumerate(mro) if "__init__" in vars(klass)]
    if not owners:
        return ()
    i, klass = owners[0], mro[owners[0]]
    params = list(inspect.signature(vars(klass)["__init__"]).parameters.values())[1:]
    named = tuple(p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))
    if not any(p.kind is p.VAR_KEYWORD for p in params):
        return named
    parents = _names(mro[i + 1 :])
    return parents + tuple(n for n in named if n not in parents)


def _plain(value: Any) -> Any:
    """A parameter as a plain value: groups as ``[w, eps]``, tuples as lists."""
    if isinstance(value, Group):
        return [value.w, value.eps]
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
