"""The interfaces the service drives (``app.dp.interfaces``): every registered mechanism has
exactly the one of its kind, and the narrowing helpers refuse the others by name."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import mypy.api
import numpy as np
import pytest

from app.dp.errors import ParameterError
from app.dp.interfaces import (
    PeriodStepped,
    RoundDriven,
    SlotStepped,
    as_period,
    as_round,
    as_slotted,
    as_view,
)
from app.dp.local.wire import Tally, mask_users
from app.dp.registry import PeriodName, RoundName, SlotName, create, get, names
from app.dp.types import Group

INTERFACE = {
    "central": SlotStepped,
    "graph": SlotStepped,
    "period": PeriodStepped,
    "local": RoundDriven,
}
NARROW = {SlotStepped: as_slotted, PeriodStepped: as_period, RoundDriven: as_round}


@pytest.mark.parametrize("name", names())
def test_each_mechanism_narrows_to_its_kinds_interface_only(name):
    m = create(name, **get(name).test_params())
    mine = INTERFACE[m.kind]
    assert NARROW[mine](m) is m
    for other, narrow in NARROW.items():
        if other is not mine:
            with pytest.raises(ParameterError, match=re.escape(f"mechanism {name} is {m.kind}")):
                narrow(m)


def test_period_releases_are_placed_on_the_stream_slots_they_belong_to():
    m = as_period(create("optstream", d=2, groups=[Group(3, 1.0)]))
    rng = np.random.default_rng(1)
    placed = [m.placed(50 + i, m.step([[i, 1]], rng)) for i in range(6)]
    assert [[s for s, _ in p] for p in placed] == [[], [], [50, 51, 52], [], [], [53, 54, 55]]
    assert [rel.slot for _, rel in placed[5]] == [4, 5, 6]


def test_a_plain_local_mechanism_runs_everybody_at_its_strictest_window():
    m = as_round(get("plbu").for_stream(3, [Group(6, 1.0), Group(2, 0.5)], users=[30, 18]))
    w, shares = m.report_windows()
    assert w.tolist() == [6, 6] and shares.tolist() == [1, 1]
    assert not m.takes_levels() and m.level_use() is None and m.available_users() is None
    with pytest.raises(ParameterError, match="plbu takes no levels"):
        m.assign([0] * 48)


def test_a_personalized_mechanism_holds_each_level_to_its_own_window_and_shares():
    m = as_round(create("plpd+", **get("plpd+").test_params()))
    w, shares = m.report_windows()
    assert w.tolist() == [g.w for g in m.groups] and shares.tolist() == list(m.shares)
    use = m.level_use()
    assert m.takes_levels() and use is not None
    assert use.users == m.group_users and use.available == m.group_users
    assert use.sitting_out == 0 and m.available_users() == sum(m.group_users)


LITERAL_NAMES = {SlotStepped: SlotName, PeriodStepped: PeriodName, RoundDriven: RoundName}


def test_create_is_typed_by_the_registrys_kinds() -> None:
    """The literal names of each ``create`` overload are exactly the registry's mechanisms of
    that interface, so the type a caller sees is the one the class has."""
    for interface, literal in LITERAL_NAMES.items():
        typed = set(typing.get_args(literal))
        assert typed == {n for n in names() if INTERFACE[get(n).kind] is interface}


README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_example() -> str:
    """The README's python block that builds a mechanism with ``create``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (found,) = [b for b in blocks if "from app.dp.registry import create" in b]
    return found


def test_readme_example_type_checks_strict(tmp_path: Path) -> None:
    """Issue 34, section 3: the README's example type-checks under ``mypy --strict`` (it ran
    before, but ``create`` returned a type without ``step``). The control file asks ``step``
    of a mechanism whose name is read at run time: mypy must flag that one, so a pass of the
    example means something."""
    example = tmp_path / "readme_example.py"
    example.write_text(_readme_example())
    control = tmp_path / "control.py"
    control.write_text(
        "import sys\nimport numpy as np\nfrom app.dp.registry import create\n"
        "m = create(sys.argv[1], d=2)\nm.step(np.zeros((1, 2)), np.random.default_rng())\n"
    )
    root = str(README.parent)
    out, _, code = mypy.api.run(
        ["--strict", "--config-file", f"{root}/pyproject.toml", str(example), str(control)]
    )
    lines = [line for line in out.splitlines() if ": error:" in line]
    assert [line for line in lines if "readme_example.py" in line] == []
    assert any("control.py" in line and '"step"' in line for line in lines), out
    assert code == 1


@pytest.mark.parametrize("name", names())
def test_every_mechanism_is_a_ledger_view_with_the_views_of_its_kind(name):
    cls = get(name)
    view = as_view(create(name, **cls.test_params()))
    assert (view.graph_window() is not None) == (cls.kind == "graph")
    pop = view.population_window()
    assert (pop is not None) == (cls.kind == "local" and bool(cls.population_division))
    if pop is not None:  # nobody asked yet: everybody available, no slot in the window
        assert (pop.available, pop.reported, pop.t) == (pop.users, [], 0)


def test_the_population_window_counts_the_cohorts_asked():
    m = as_round(create("lpd", d=3, eps=1.0, w=4, users=48))
    rng = np.random.default_rng(3)
    asked = []
    for _ in range(3):
        request = m.open_slot(rng)
        while request is not None:
            asked.append(int(mask_users(request, m.users).sum()))
            request = m.on_tally(Tally(request.slot, request.round, *_empty(request, 3)), rng)
        m.close_slot()
    pop = m.population_window()
    assert pop is not None and pop.users == m.users == 48
    assert sum(pop.reported) == sum(asked) and pop.available == 48 - sum(asked)


def _empty(request, d):
    m = len(request.oracle)
    return np.zeros((m, d), dtype=np.int64), np.zeros(m, dtype=np.int64)


def test_the_mechanism_states_its_users_and_their_groups():
    m = as_round(get("plbu").for_stream(3, [Group(6, 1.0), Group(2, 0.5)], users=[30, 18]))
    assert m.users == 48
    assert m.user_groups().tolist() == [0] * 30 + [1] * 18
