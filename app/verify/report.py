"""How ``dpstream verify`` prints a :class:`~app.verify.verdict.Verdict`: text or JSON.

User ids appear only with ``show_users`` (the output is then as sensitive as ``events``);
without it a violation shows its kind, slots and detail line, and how many users it involves.
"""

from __future__ import annotations

import json
from typing import Any

from app.verify.verdict import KINDS, Verdict

SHOWN_PER_KIND = 20
"""Text output: findings printed per kind (the JSON has every kept finding)."""


def to_dict(verdict: Verdict, show_users: bool = False) -> dict[str, Any]:
    """The verdict as plain values (what ``--json`` prints)."""
    first, last, count = verdict.slots if verdict.slots is not None else (None, None, 0)
    return {
        "stream": verdict.stream,
        "mode": verdict.mode,
        "ok": verdict.ok,
        "since": verdict.since,
        "slots": {"first": first, "last": last, "released": count},
        "levels": [
            {
                "name": lv.name,
                "w": lv.w,
                "eps": lv.eps,
                "users": lv.users,
                "worst_window_fraction": round(lv.worst, 9),
                **(
                    {"delta": lv.delta, "worst_window_delta_fraction": round(lv.worst_delta, 9)}
                    if lv.delta is not None
                    else {}
                ),
            }
            for lv in verdict.levels
        ],
        "values": {
            "released": round(verdict.released, 6),
            "not_released": dict(sorted(verdict.not_released.items())),
            "not_judged": verdict.unjudged,
        },
        "privacy_unit": _unit(verdict),
        "refused_internal": dict(sorted(verdict.refused.items())),
        "violations": dict(sorted(verdict.counts.items())),
        "findings": [
            {
                "kind": v.kind,
                "slots": list(v.slots),
                "detail": v.detail,
                "users": len(v.users),
                **({"user_ids": list(v.users)} if show_users else {}),
            }
            for v in verdict.violations
        ],
    }


def _unit(verdict: Verdict) -> dict[str, Any] | None:
    u = verdict.unit
    if u is None:
        return None
    return {
        "unit": u.bound.unit,
        "interval_s": u.bound.interval_s,
        "bound_eps": u.bound.eps,
        "streams_judged": list(u.streams),
        "users": u.users,
        "worst": round(u.worst, 9),
        **(
            {"bound_delta": u.bound.delta, "worst_delta": u.worst_delta}
            if u.bound.states_delta
            else {}
        ),
    }


def to_json(verdict: Verdict, show_users: bool = False) -> str:
    return json.dumps(to_dict(verdict, show_users), sort_keys=False)


def to_text(verdict: Verdict, show_users: bool = False) -> str:
    """Lines for an operator: the slots, spend per level, values, then each violation kind."""
    what = "values" if verdict.mode == "central" else "device answers"
    lines = [f"stream {verdict.stream} ({verdict.mode})"]
    if verdict.slots is not None:
        first, last, count = verdict.slots
        lines.append(f"  slots released: {count} ({first} .. {last})")
    else:
        lines.append("  slots released: none")
    for lv in verdict.levels:
        delta = f", delta={lv.delta:g}" if lv.delta is not None else ""
        line = (
            f"  level {lv.name} (w={lv.w}, eps={lv.eps:g}{delta}): {lv.users} users, worst "
            f"window spend {lv.worst:.4f} of eps"
        )
        if lv.delta is not None:
            line += f", {lv.worst_delta:.4f} of delta"
        lines.append(line)
    lines.append(f"  {what} accounted: {verdict.released:g}")
    if verdict.unit is not None:
        u = verdict.unit
        lines.append(
            f"  privacy unit {u.bound.unit} ({', '.join(u.streams)}): {u.users} users, worst "
            f"{u.worst:.4g} in {u.bound.interval_s:g} s of a bound of eps {u.bound.eps:g}"
            + (f", delta {u.worst_delta:.4g} of {u.bound.delta:g}" if u.bound.states_delta else "")
        )
    for reason, n in sorted(verdict.not_released.items()):
        lines.append(f"  {what} not released ({reason}): {n}")
    if verdict.unjudged:
        lines.append(
            f"  {what} not judged (the level history their slot was counted with was "
            f"compacted away): {verdict.unjudged}"
        )
    for reason, n in sorted(verdict.refused.items()):
        lines.append(f"  internal partials refused by the release agent ({reason}): {n}")
    if verdict.ok:
        lines.append("  no violation")
    for kind, n in sorted(verdict.counts.items()):
        lines.append(f"  VIOLATION {kind} x{n}: {KINDS.get(kind, kind)}")
        shown = [v for v in verdict.violations if v.kind == kind][:SHOWN_PER_KIND]
        for v in shown:
            who = (
                (f" users: {', '.join(v.users)}" if show_users else f" ({len(v.users)} user(s))")
                if v.users
                else ""
            )
            lines.append(f"    slots {list(v.slots)}: {v.detail}{who}")
        if n > len(shown):
            lines.append(f"    ... {n - len(shown)} more")
    return "\n".join(lines)
