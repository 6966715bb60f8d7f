"""Which noise the auditor builds a mechanism with: the service's default, then the papers'.

The auditor audits what the service runs. A stream that does not name a noise gets the stream
file's default (``app.stream.config.streams.DEFAULTS``, ``geometric`` today), passed to the
mechanism by :meth:`~app.stream.config.model.StreamConfig.build_mechanism`. For central and
period kinds :func:`service_noise` asks the service's own parser what it builds for a minimal
stream entry, so a change of that default (or of what a period mechanism accepts) is followed
without touching the auditor. Where the service refuses its own default for a mechanism (the
period mechanisms accept only ``laplace`` until they get safe noise), the mechanism's
constructor default is what an operator can run, and the auditor takes that.

``laplace`` is the papers' variant (real-valued releases; not ``eps``-DP in floating point,
``docs/audit.md``): :func:`noise_variants` adds it after the service's default when asked.
"""

from __future__ import annotations

import inspect
from typing import Any

PAPERS_NOISE = "laplace"


def constructor_noise(cls: Any) -> str | None:
    """The ``noise`` default of the class's constructor, or of the first base constructor that
    names it (a subclass may pass ``**params`` through); None if none takes a noise."""
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameter = inspect.signature(klass.__init__).parameters.get("noise")
        if parameter is not None and parameter.default is not inspect.Parameter.empty:
            return str(parameter.default)
    return None


def service_noise(name: str, cls: Any) -> str | None:
    """The noise the service builds ``name`` with when a stream does not set one (None for a
    mechanism without a noise parameter, such as a local one)."""
    from app.dp.errors import DPError
    from app.stream.config.streams import DEFAULTS, parse_stream
    from app.stream.errors import ConfigError

    own = constructor_noise(cls)
    if own is None:
        return None
    if cls.kind in ("central", "period"):
        entry = {
            "id": "audit",
            "d": 2,
            "mechanism": {"name": name},
            "levels": [{"name": "audit", "w": 2, "eps": 1.0}],
        }
        try:
            return str(parse_stream(entry, "audit", {}).build_mechanism().noise)  # type: ignore[attr-defined]
        except ConfigError:
            return own
    params = dict(cls.test_params())  # graph: the parser needs a graph file; build directly
    try:
        cls(**{**params, "noise": DEFAULTS["noise"]})
    except (DPError, TypeError):
        return own
    return str(DEFAULTS["noise"])


def noise_variants(name: str, cls: Any, papers: bool) -> list[str | None]:
    """The noises to audit ``name`` with: the service's default first, then (``papers``) the
    papers' ``laplace`` when that is another kind the mechanism accepts."""
    default = service_noise(name, cls)
    out: list[str | None] = [default]
    if papers and default is not None and default != PAPERS_NOISE:
        out.append(PAPERS_NOISE)
    return out
