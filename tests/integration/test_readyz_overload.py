"""``/readyz`` answers within 1 s under real overload (issue 23, item 5).

Runs ``dpstream capacity overload`` (:mod:`app.tools.capacity.overload`) for 20 s: two
producers at full speed against one worker (about 4x what it ingests on 2 shared cores: 215,000
events/s produced, 54,000 counted, lag growing to 53 s over 60 s), ``/readyz`` asked every
100 ms. Measured over 60 s: max 0.20 s, p99 0.11 s, p50 0.015 s (657 answers), every 503 saying
the release lag, never ``broker unreachable``. The bound is the issue's 1 s, five times the
maximum measured.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.tools.capacity.overload import BOUND_S

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_readyz_answers_within_a_second_under_overload(tmp_path: Path):
    out = tmp_path / "readyz.json"
    status = main(["capacity", "overload", "--seconds", "20", "--json", str(out)])
    found = json.loads(out.read_text())
    print(f"\n{json.dumps(found['overload'])}")
    over = found["overload"]
    assert found["produced_per_s"] > found["counted_per_s"], "not overloaded"
    assert over["max_s"] <= BOUND_S, over
    assert status == 0
    assert all("broker unreachable" not in reason for reason in over["reasons"]), over
    assert set(over["by_status"]) <= {"200", "503"}, over  # every poll got an answer
