"""Local streams in the streams file: schema, mechanism built through the registry, errors."""

from __future__ import annotations

import pytest

from app.dp.local import LPA, PLBU
from app.stream.config import load_streams
from app.stream.errors import ConfigError

BASE = """
streams:
  - id: u
    mode: local
    d: 4
    slot_s: 60
    round_s: 10
    mechanism: {{name: {name}, params: {params}}}
    levels: {levels}
"""
ONE = "[{name: std, w: 5, eps: 1.0}]"


def load(tmp_path, name="lpa", params="{users: 1000, oracle: grr}", levels=ONE, env=None):
    path = tmp_path / "s.yaml"
    path.write_text(BASE.format(name=name, params=params, levels=levels))
    return load_streams(path, env=env or {})


def test_a_local_stream_builds_its_mechanism(tmp_path):
    [s] = load(tmp_path)
    assert s.local and s.users == 1000 and s.round_s == 10.0
    m = s.build_mechanism()
    assert isinstance(m, LPA) and (m.eps, m.w, m.users, m.oracle) == (1.0, 5, 1000, "grr")


def test_plbu_takes_one_user_count_per_level(tmp_path):
    levels = "[{name: a, w: 5, eps: 1.0}, {name: b, w: 2, eps: 2.0}]"
    [s] = load(tmp_path, "plbu", "{users: [300, 700]}", levels)
    assert isinstance(s.build_mechanism(), PLBU) and s.users == 1000


def test_a_non_personalized_mechanism_runs_at_the_strictest_level(tmp_path):
    """Several levels and LPA: every user is protected at (max w, min eps) (issue 16)."""
    [s] = load(tmp_path, levels="[{name: a, w: 5, eps: 1}, {name: b, w: 2, eps: 0.5}]")
    m = s.build_mechanism()
    assert isinstance(m, LPA) and (m.w, m.eps) == (5, 0.5)


@pytest.mark.parametrize(
    ("name", "params", "levels", "env", "match"),
    [
        ("pba", "{users: 10}", ONE, None, "mechanism.name must be one of"),
        ("lpa", "{oracle: grr}", ONE, None, "registered users"),
        ("plbu", "{users: 10}", ONE, None, "one count per group"),
        ("lpa", "{users: 10}", ONE, {"DPSTREAM_STREAM_U_ROUND_S": "40"}, "two rounds must fit"),
        ("lpa", "{users: 10, oracle: nope}", ONE, None, "oracle"),
    ],
)
def test_bad_local_streams_name_the_field(tmp_path, name, params, levels, env, match):
    with pytest.raises(ConfigError, match=match):
        load(tmp_path, name, params, levels, env)


@pytest.mark.parametrize("name", ["plpd", "plpa", "plpd+", "plpa+"])
def test_a_pldp_stream_offers_several_levels_with_users_per_level(tmp_path, name):
    """PLDP-IDS (issue 12): each level keeps its own (w_i, eps_i); users in blocks per level."""
    levels = "[{name: a, w: 6, eps: 1.0}, {name: b, w: 2, eps: 2.0}]"
    [s] = load(tmp_path, name, "{users: [600, 400]}", levels)
    m = s.build_mechanism()
    assert [(g.w, g.eps) for g in m.groups] == [(6, 1.0), (2, 2.0)]
    assert m.group_users == [600, 400] and s.users == 1000


@pytest.mark.parametrize(
    ("params", "match"),
    [("{users: 1000}", "one count per group"), ("{users: [600, 0]}", "registered users")],
)
def test_a_pldp_stream_with_bad_users_names_the_field(tmp_path, params, match):
    levels = "[{name: a, w: 6, eps: 1.0}, {name: b, w: 2, eps: 2.0}]"
    with pytest.raises(ConfigError, match=match) as err:
        load(tmp_path, "plpa+", params, levels)
    assert "\n" not in str(err.value)
