"""``dpstream capacity open-keys`` at a small key count (issue 36, section 2): both sides of an
open slot run, the release side through the release agent's own code in a fresh process.

The bench's level (``eps = 1`` over ``w = 10``, ``delta = 1e-6``, ``max_keys = 1``) selects a
new key above a threshold ``tau`` (324) with discrete Laplace noise of scale ``Delta / eps_t =
2 / 0.1 = 20``. A hot key has ``ceil(1.5 tau)`` users: 162 above it, eight noise scales, so it
is missed with probability below ``e**-8 / 2 < 2e-4``; with 8 hot keys and a cap of 4, fewer
than 4 selected has probability below ``C(8, 5) * (2e-4)**5 < 2e-17``. A key of one user is
selected with probability at most the slot's delta share (``1e-7``): none of 2,000 such keys
is, but with probability below ``2e-4``. The noise key is drawn at random each run.
"""

from __future__ import annotations

import json
import math

import pytest

from app.cli import main
from app.tools.capacity.open_keys import HOT_MARGIN, measure

GAMMA = 0.1 / 2
"""``eps_t / Delta``: the slot's eps (1 over w = 10) over ``Delta = 2`` (replace, max_keys 1)."""
A = math.exp(-GAMMA)
TAU = 1 + max(1, math.ceil(math.log(1e-7 * (1 + A) / 2) / math.log(A)))
"""The bench stream's selection threshold (``docs/open-domain.md``, "Selection threshold"), at
the slot's delta share ``1e-6 / 10``: 324."""


def test_the_cli_prints_one_table_for_both_sides_and_the_release_is_capped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["capacity", "open-keys", "--keys", "2000", "--batch", "500"]
    assert main([*argv, "--max-released-keys", "4"]) == 0
    out, err = capsys.readouterr()
    figures = json.loads(out)
    collect, release = figures["collect"], figures["release"]
    hot_users = math.ceil(HOT_MARGIN * TAU)
    assert figures["hot_keys"] == 8 and collect["events"] == 2000 + 8 * hot_users
    assert release["released_keys"] == release["cap"] == 4
    assert collect["chunks"] >= 1 and collect["wire_mib"] >= 0
    assert 0 < release["release_bytes"] < release["ledger_entry_bytes"]
    for side in (collect["side"], release["side"]):
        assert 0 < side["rss_before_mib"] <= side["rss_peak_mib"]
    stages = [collect["fill"], collect["close"], release["merge"], release["gather_step"]]
    for stage in [*stages, release["encode"]]:
        assert stage["wall_s"] >= 0 and stage["cpu_s"] >= 0 and stage["rss_mib"] > 0
    assert release["gather_step"]["wall_s"] >= release["step_wall_s"] - 0.01  # rounding
    lines = err.splitlines()
    assert [ln.split()[0] for ln in lines[1:8]] == ["collect"] * 3 + ["release"] * 4
    assert "released 4 keys (cap 4)" in lines[-1]


def test_without_hot_keys_no_key_of_one_user_is_released() -> None:
    figures = measure(2_000, 16, 1_000, cap=4, hot_keys=0)
    assert figures.collect.events == 2_000
    assert figures.release.released_keys == 0
    assert figures.release.release_bytes < figures.release.ledger_entry_bytes


def test_more_hot_keys_than_keys_is_refused() -> None:
    with pytest.raises(ValueError, match="hot keys"):
        measure(10, 16, 10, hot_keys=11)
