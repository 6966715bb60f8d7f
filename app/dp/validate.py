"""Parameter checks shared by every mechanism, oracle and ledger of the core.

Each check returns the value in its stored form (``int``, ``float``, a tuple) or raises a
:class:`~app.dp.errors.ParameterError` whose message names the parameter, the rule it broke and
the value it got, so an operator can fix the stream's configuration from the message alone
(tumult-core's ``AddLaplaceNoise.__init__`` checks its arguments the same way).

>>> integer("w", 4)
4
>>> integer("d", 1, 2)
Traceback (most recent call last):
...
app.dp.errors.ParameterError: d must be an integer >= 2, got 1
>>> number("p_max", 0.6, 0.0, strict=True, high=1.0)
0.6
>>> choice("noise", "gaussian", ("laplace", "geometric"))
Traceback (most recent call last):
...
app.dp.errors.ParameterError: noise must be one of ('laplace', 'geometric'), got 'gaussian'
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from app.dp.errors import ParameterError

T = TypeVar("T")


def integer(name: str, value: Any, low: int = 1, *, high: int | None = None) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= low`` and, when ``high``
    is given, ``< high``."""
    ok = not isinstance(value, bool) and isinstance(value, int | np.integer)
    if not ok or value < low or (high is not None and value >= high):
        bound = f">= {low}" if high is None else f"in [{low}, {high})"
        raise ParameterError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def number(
    name: str,
    value: Any,
    low: float = -math.inf,
    *,
    strict: bool = False,
    high: float = math.inf,
) -> float:
    """``value`` as a ``float`` if it is a finite number (not a bool) ``>= low`` (``> low``
    when ``strict``) and ``<= high``."""
    ok = not isinstance(value, bool) and isinstance(value, int | float | np.integer | np.floating)
    if ok and math.isfinite(value) and (value > low if strict else value >= low) and value <= high:
        return float(value)
    bound = f"{'>' if strict else '>='} {low:g}"
    if high < math.inf:
        bound += f" and <= {high:g}"
    raise ParameterError(f"{name} must be a finite number {bound}, got {value!r}")


def positive(name: str, value: Any) -> float:
    """``value`` as a ``float`` if it is a finite number ``> 0`` (a budget, a scale)."""
    return number(name, value, 0.0, strict=True)


def choice(name: str, value: T, choices: Iterable[Any]) -> T:
    """``value`` if it is one of ``choices``."""
    options = tuple(choices)
    if value not in options:
        raise ParameterError(f"{name} must be one of {options}, got {value!r}")
    return value


def flag(name: str, value: Any) -> bool:
    """``value`` if it is a bool."""
    if not isinstance(value, bool):
        raise ParameterError(f"{name} must be True or False, got {value!r}")
    return value


def sequence(name: str, value: Iterable[Any], of: type[T]) -> tuple[T, ...]:
    """``value`` as a tuple if it is a non-empty sequence of ``of`` instances."""
    items = tuple(value)
    if not items or not all(isinstance(x, of) for x in items):
        raise ParameterError(f"{name} must be a non-empty sequence of {of.__name__}, got {items!r}")
    return items


def counts(value: npt.ArrayLike, groups: int, d: int) -> npt.NDArray[np.int64]:
    """A slot's true counts, ``(groups, d)`` non-negative integers, as a new int64 array."""
    c = np.array(value, copy=True)
    if c.shape != (groups, d):
        raise ParameterError(f"counts must have shape (groups={groups}, d={d}), got {c.shape}")
    if c.size and (not np.issubdtype(c.dtype, np.integer) or (c < 0).any()):
        raise ParameterError("counts must be non-negative integers")
    return c.astype(np.int64)


__all__ = ["choice", "counts", "flag", "integer", "number", "positive", "sequence"]
