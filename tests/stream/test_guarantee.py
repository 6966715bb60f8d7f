"""Issue 33 sections 1, 2 and 4 (docs/design.md invariant 8): every setting the service
accepts without ``accept_weaker_guarantee`` is DP as implemented (no float Laplace, no noise
shared between deployments), and every public record says the guarantee it carries."""

from __future__ import annotations

from pathlib import Path

import msgpack
import numpy as np
import pytest

from app import metrics
from app.cli import main
from app.client.releases import decode_release
from app.dp.errors import InsufficientBudgetError
from app.dp.interfaces import as_period, as_slotted
from app.dp.local.personal_population import PersonalPopulation, PersonalWindowError
from app.dp.registry import get, names
from app.stream.config import DEFAULT_STREAMS, load_settings, parse_stream
from app.stream.config.streams import CENTRAL_KINDS
from app.stream.errors import ConfigError
from app.stream.internal import Tick
from app.stream.records import encode_release, unpack
from app.stream.release.protocol import Publisher
from app.stream.topics import load_topics
from app.tools.releases import format_line
from tests.stream.agent import agent, sized_topics
from tests.stream.agent import run as agent_run

KEY = "cd" * 16
LEVELS = "    levels: [{name: only, w: 4, eps: 1.0}]\n"


def central_yaml(mechanism: str, extra: str = "") -> str:
    return (
        f"streams:\n  - id: c\n    labels: [a, b, c]\n    mechanism: {mechanism}\n{extra}{LEVELS}"
    )


def settings_for(tmp_path: Path, text: str, **env: str):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_settings(
        env={"DPSTREAM_NOISE_KEY": KEY, "DPSTREAM_DEPLOYMENT": "t", **env}, config=path
    )


@pytest.fixture
def worker_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("DPSTREAM_CONFIG", "DPSTREAM_NOISE_KEY_FILE", "DPSTREAM_DEPLOYMENT_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", KEY)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "t")
    monkeypatch.setenv("DPSTREAM_BROKER", "127.0.0.1:1")
    monkeypatch.setenv("DPSTREAM_BROKER_TIMEOUT_S", "1")
    return monkeypatch


def refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(["worker", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# -- section 1: no float Laplace without the flag -------------------------------------------------


@pytest.mark.parametrize("mechanism", ["pba", "uniform", "optstream", "dft", "stbd"])
def test_a_streams_file_with_laplace_and_no_flag_is_refused_with_one_line_and_exit_2(
    tmp_path, worker_env, capsys, mechanism
):
    extra = "    graph: {grid: 1 x 3, neighbours: 4, n: 1}\n" if mechanism == "stbd" else ""
    path = tmp_path / "s.yaml"
    path.write_text(central_yaml(f"{{name: {mechanism}, noise: laplace}}", extra))
    line = refused(capsys, "--config", str(path))
    assert "noise: laplace" in line and "accept_weaker_guarantee: true" in line


class NoFloatLaplace:
    """A generator that refuses numpy's float Laplace and hands out everything else."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)

    def laplace(self, *_: object, **__: object) -> None:
        raise AssertionError("a float Laplace draw")

    def __getattr__(self, name: str) -> object:
        return getattr(self._rng, name)


def _steps(stream, rng, slots: int = 12) -> None:
    mech = stream.build_mechanism()
    data = np.random.default_rng(1)
    population = [lv.population for lv in stream.levels]
    for _ in range(slots):
        counts = data.integers(0, 30, (len(stream.levels), stream.d))
        step = as_period(mech).step if stream.period else as_slotted(mech).step
        step(counts, rng, population)


@pytest.mark.parametrize("name", [n for kind in CENTRAL_KINDS for n in names(kind)])
def test_no_stream_the_service_accepts_without_the_flag_draws_float_laplace(name):
    """Every central, period and graph mechanism, built from a streams entry that names no
    noise, runs 12 slots without one float Laplace draw; the same entry with ``noise:
    laplace`` and the flag draws one (the control: the stand-in catches a draw)."""
    entry = {
        "id": "s",
        "labels": ["a", "b", "c", "d"],
        "mechanism": {"name": name},
        "levels": [{"name": "a", "w": 3, "eps": 1.0}, {"name": "b", "w": 2, "eps": 2.0}],
    }
    if get(name).kind == "graph" and not name.startswith("rescuedp"):
        entry["graph"] = {"grid": "2 x 2", "neighbours": 4, "n": 1}
    _steps(parse_stream(entry, "t", {}), NoFloatLaplace(0))
    papers = {**entry, "mechanism": {"name": name, "noise": "laplace"}}
    with pytest.raises(ConfigError, match="accept_weaker_guarantee"):
        parse_stream(papers, "t", {})
    with pytest.raises(AssertionError, match="float Laplace"):
        _steps(
            parse_stream({**papers, "accept_weaker_guarantee": True}, "t", {}), NoFloatLaplace(0)
        )


def test_laplace_from_the_environment_override_is_refused_too(tmp_path):
    with pytest.raises(ConfigError, match="accept_weaker_guarantee"):
        settings_for(tmp_path, central_yaml("{name: pba}"), DPSTREAM_STREAM_C_NOISE="laplace")


def test_a_local_stream_takes_no_service_noise(tmp_path):
    text = (
        "streams:\n  - id: l\n    mode: local\n    d: 2\n    slot_s: 10\n    round_s: 2\n"
        "    release_timeout_s: 1\n    accept_weaker_guarantee: true\n"
        "    mechanism: {name: lpa, noise: laplace, params: {users: 60}}\n" + LEVELS
    )
    with pytest.raises(ConfigError, match="local stream adds no service noise"):
        settings_for(tmp_path, text)


def test_with_the_flag_laplace_runs_and_every_record_says_so(tmp_path):
    flag = "    accept_weaker_guarantee: true\n"
    (stream,) = settings_for(tmp_path, central_yaml("{name: pba, noise: laplace}", flag)).streams
    assert stream.build_mechanism().noise == "laplace"
    assert stream.weaker_guarantee is not None and "laplace" in stream.weaker_guarantee
    mech = stream.build_mechanism()
    rel = mech.step(np.zeros((1, 3), dtype=np.int64), np.random.default_rng(0), [1000])
    record, audit, _ = encode_release(stream, 5, rel, "", mech.window_report(), [])
    g = unpack(record)["guarantee"]
    assert (g["noise"], g["weaker"], g["weaker_reason"]) == (
        "laplace",
        True,
        stream.weaker_guarantee,
    )
    a = unpack(audit)
    assert (a["noise"], a["weaker_guarantee"]) == ("laplace", stream.weaker_guarantee)


def test_the_default_noise_needs_no_flag_and_says_dp_as_implemented(tmp_path):
    (stream,) = settings_for(tmp_path, central_yaml("{name: pba}")).streams
    assert stream.weaker_guarantee is None and stream.warnings == ()
    mech = stream.build_mechanism()
    rel = mech.step(np.zeros((1, 3), dtype=np.int64), np.random.default_rng(0), [1000])
    record, audit, _ = encode_release(stream, 5, rel, "", mech.window_report(), [], deployment="t")
    assert unpack(record)["guarantee"] == {
        "eps": 1.0,
        "w": 4,
        "relation": "replace",
        "noise": "geometric",
        "weaker": False,
        "weaker_reason": None,
    }
    assert (unpack(audit)["noise"], unpack(audit)["deployment"]) == ("geometric", "t")


# -- section 4: paper_ceil_z refused without the flag ---------------------------------------------

PLDP = """
streams:
  - id: p
    mode: local
    d: 5
    slot_s: 10
    round_s: 2
    release_timeout_s: 1
{flag}    mechanism:
      name: plpd+
      params: {{users: [10000, 269], buckets: 256, split_rule: paper_ceil_z}}
    levels: [{{name: short, w: 62, eps: 1.0}}, {{name: long, w: 125, eps: 1.0}}]
"""


def test_the_papers_split_rule_is_refused_without_the_flag(tmp_path, worker_env, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(PLDP.format(flag=""))
    line = refused(capsys, "--config", str(path))
    assert "paper_ceil_z" in line and "accept_weaker_guarantee: true" in line


SMALL = """
streams:
  - id: p
    mode: local
    d: 3
    slot_s: 10
    round_s: 2
    release_timeout_s: 1
    accept_weaker_guarantee: true
    mechanism: {name: plpd+, params: {users: [600, 400], split_rule: paper_ceil_z}}
    levels: [{name: short, w: 4, eps: 1.0}, {name: long, w: 8, eps: 1.0}]
"""


def test_a_mechanisms_refusal_skips_the_slot_and_never_stops_the_worker(tmp_path, monkeypatch):
    """The population ledger's PersonalWindowError, planted at slot 5 (the first round: the slot
    is left out) and slot 9 (after a round was asked: closed with nobody more asked, a repeat):
    the agent counts both, logs them, and goes on releasing every other slot once."""
    settings = settings_for(tmp_path, SMALL)
    (stream,) = settings.streams
    assert "paper_ceil_z" in (stream.weaker_guarantee or "")
    cls = type(stream.build_mechanism())
    mark, on_tally = PersonalPopulation.mark, cls.on_tally
    planted = {"mark": 0, "tally": 0}

    def refuse(t: int) -> PersonalWindowError:
        return PersonalWindowError(0, 1, stream.groups[1], 2, [t - 1], t)

    def refusing_mark(self, t, cohort):
        if t == 5 and planted["mark"] == 0:
            planted["mark"] += 1
            raise refuse(t)
        return mark(self, t, cohort)

    def refusing_tally(self, tally, rng):
        if tally.slot == 8 and planted["tally"] < 2:  # mechanism slot 8 is wall slot 9
            planted["tally"] += 1
            raise refuse(tally.slot)
        return on_tally(self, tally, rng)

    monkeypatch.setattr(PersonalPopulation, "mark", refusing_mark)
    monkeypatch.setattr(cls, "on_tally", refusing_tally)
    ledger: dict[str, bytes] = {}
    slots: dict[str, bytes] = {}
    sent: list[tuple[str, bytes]] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        sent.append((topic, value))

    r = agent(settings, ledger, slots, produce, sized_topics(reports=2))
    counter = metrics.MECHANISM_REFUSALS.labels("p")
    before = counter._value.get()
    agent_run(r, Tick("p", {}, 2).encode(), 5.0)  # first slot: 1
    for s in range(1, 13):
        for at in (0.1, 3.5):  # open the round; close it at its deadline + timeout, unanswered
            agent_run(r, Tick("p", {}, 2).encode(), 10.0 * s + at)
    assert planted == {"mark": 1, "tally": 2}
    assert counter._value.get() - before == 2 and r.failed == {}
    released = [msgpack.unpackb(v)["slot"] for t, v in sent if t == "releases"]
    assert released == [s for s in range(1, 13) if s != 5]
    entry = msgpack.unpackb(ledger["p"])
    assert entry["next_slot"] == 13


def test_a_central_mechanisms_refusal_stops_that_stream_only(tmp_path, monkeypatch):
    """A central mechanism's own check (a planted InsufficientBudgetError) is counted; its
    stream is no longer served (``/readyz`` lists it), the others go on, the worker never stops."""
    text = "streams:\n" + "".join(
        f"  - id: {sid}\n    labels: [a, b]\n    slot_s: 1\n    grace_s: 0.5\n"
        f"    release_timeout_s: 1\n    mechanism: {{name: {mech}}}\n{LEVELS}"
        for sid, mech in (("bad", "uniform"), ("good", "pba"))
    )
    settings = settings_for(tmp_path, text)
    cls = type(settings.stream("bad").build_mechanism())

    def refuse(self, *_: object) -> None:
        raise InsufficientBudgetError(0, 1.0, 0.5, 1.0, "planted:")

    monkeypatch.setattr(cls, "step", refuse)
    sent: list[tuple[str, bytes]] = []

    async def produce(topic: str, key: bytes, value: bytes) -> None:
        sent.append((topic, value))

    r = agent(settings, {}, {}, produce)
    counter = metrics.MECHANISM_REFUSALS.labels("bad")
    before = counter._value.get()
    for now in (10.6, 11.6, 12.6, 13.6):
        for sid in ("bad", "good"):
            agent_run(r, Tick(sid, {0: now}, 1).encode(), now)
    assert counter._value.get() - before == 1
    assert set(r.failed) == {"bad"} and "planted" in r.failed["bad"]
    released = [msgpack.unpackb(v)["stream"] for t, v in sent if t == "releases"]
    assert released and set(released) == {"good"}


# -- section 2: a deployment identity nobody shares by accident ----------------------------------


def test_a_noise_key_without_a_deployment_identity_is_refused(tmp_path, worker_env, capsys):
    worker_env.delenv("DPSTREAM_DEPLOYMENT")
    line = refused(capsys, "--config", str(DEFAULT_STREAMS))
    assert line.startswith("dpstream worker: DPSTREAM_DEPLOYMENT")
    worker_env.setenv("DPSTREAM_DEPLOYMENT", "  ")
    assert "DPSTREAM_DEPLOYMENT" in refused(capsys, "--config", str(DEFAULT_STREAMS))


def test_the_deployment_identity_comes_from_the_environment_or_a_file(tmp_path):
    env = {"DPSTREAM_NOISE_KEY": KEY}
    with pytest.raises(ConfigError, match="DPSTREAM_DEPLOYMENT"):
        load_settings(env=env)
    with pytest.raises(ConfigError, match="DPSTREAM_DEPLOYMENT must be"):
        load_settings(env={**env, "DPSTREAM_DEPLOYMENT": "two\nlines"})
    path = tmp_path / "deployment-id"
    path.write_text("compose-0123abcd\n")
    assert load_settings(env={**env, "DPSTREAM_DEPLOYMENT_FILE": str(path)}).deployment == (
        "compose-0123abcd"
    )
    assert load_settings(env={}).deployment == ""  # no key, no noise: nothing to separate


def _released_differences(deployments: tuple[str, str], slots: int) -> tuple[int, int]:
    """Two deployments of the default streams file, one noise key, different data: in how many
    of ``slots`` the difference of their releases is exactly the difference of their data,
    and in how many both released a fresh histogram."""
    settings = [
        load_settings(env={"DPSTREAM_NOISE_KEY": KEY, "DPSTREAM_DEPLOYMENT": d})
        for d in deployments
    ]
    stream = settings[0].streams[0]
    pubs = [Publisher(s, load_topics(), {}, _unused, _unused) for s in settings]
    mechs = [s.stream(stream.id).build_mechanism() for s in settings]
    data = np.random.default_rng(33)
    population = [lv.population for lv in stream.levels]
    exact = fresh = 0
    for slot in range(1000, 1000 + slots):
        counts = [data.integers(0, 5000, (len(stream.levels), stream.d)) for _ in deployments]
        rels = [
            m.step(c, p.rng(stream, slot), population)  # type: ignore[attr-defined]
            for m, c, p in zip(mechs, counts, pubs, strict=True)
        ]
        fresh += all(r.fresh for r in rels)
        truth = counts[0].sum(axis=0) - counts[1].sum(axis=0)
        exact += bool(np.array_equal(rels[0].histogram - rels[1].histogram, truth))
    return exact, fresh


async def _unused(*_: object) -> None:
    raise AssertionError("not used")


def test_two_deployments_one_key_different_data_never_release_the_data_difference():
    exact, fresh = _released_differences(("prod", "staging"), 40)
    assert fresh >= 1
    assert exact == 0  # of 40
    # Control: the identity shared (as the former default "" did), the same noise cancels
    # wherever both mechanisms drew it the same way (38 of 40 slots when this was written).
    shared, _ = _released_differences(("same", "same"), 40)
    assert shared > 0


# -- section 4: the release record and its reader ----------------------------------------------


def test_a_release_record_names_its_guarantee_and_the_reader_prints_it(tmp_path):
    levels = "    levels: [{name: strict, w: 8, eps: 0.5}, {name: relaxed, w: 4, eps: 1.0}]\n"
    text = f"streams:\n  - id: c\n    labels: [a, b]\n    mechanism: {{name: pba}}\n{levels}"
    (stream,) = settings_for(tmp_path, text).streams
    mech = stream.build_mechanism()
    rel = mech.step(np.zeros((2, 2), dtype=np.int64), np.random.default_rng(0), [1000, 1000])
    record, _, _ = encode_release(stream, 3, rel, "", mech.window_report(), [])
    release = decode_release(record)
    assert release.guarantee is not None
    assert release.guarantee["levels"] == {
        "strict": {"eps": 0.5, "w": 8},
        "relaxed": {"eps": 1.0, "w": 4},
    }
    assert release.to_json()["guarantee"] == release.guarantee
    line = format_line(release, stream.labels)
    assert "guarantee levels strict eps=0.5 w=8 (default), relaxed eps=1 w=4" in line
    assert "replace, noise geometric, DP as implemented" in line


def test_a_record_without_the_guarantee_still_decodes_and_old_readers_ignore_it():
    old = {
        "stream": "c",
        "slot": 3,
        "start": 180.0,
        "end": 240.0,
        "histogram": [1.0, 2.0],
        "fresh": True,
        "mechanism": "pba",
        "spent_by_group": {"only": 0.1},
        "version": 1,
    }
    release = decode_release(msgpack.packb(old))
    assert release.guarantee is None and "guarantee not stated" in format_line(release)
    with pytest.raises(ValueError, match="guarantee"):
        decode_release(msgpack.packb({**old, "guarantee": "strict"}))
    # A reader of the layout before the field takes only the fields it knows (schema 1 stays).
    g = {"eps": 1.0, "w": 4, "relation": "replace", "noise": "geometric", "weaker": False}
    new = decode_release(msgpack.packb({**old, "guarantee": g, "schema": 1}))
    assert new.histogram == release.histogram and new.schema == 1
