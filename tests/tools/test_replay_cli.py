"""``dpstream replay`` offline: what it counts (against a plain model of the rules), that the
order of the file and the size of its blocks change nothing, its noise sources, its refusals
and its help. The equality with the worker is tests/integration/test_replay_equals_worker.py."""

from __future__ import annotations

import io
import json
import random
from datetime import UTC
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from app.stream.config import load_settings
from app.tools.replay import run
from app.tools.replay.read import Row, read_rows

SLOT_S = 10.0
LABELS = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]
CONFIG = f"""
streams:
  - id: s
    labels: {LABELS}
    slot_s: {SLOT_S}
    grace_s: 2
    mechanism: {{name: bd}}
    levels: [{{name: only, w: 3, eps: 1.5}}]
  - id: dev
    mode: local
    labels: [x, y]
    slot_s: 10
    round_s: 1
    release_timeout_s: 1
    mechanism: {{name: lpd, params: {{users: 100, oracle: grr}}}}
    levels: [{{name: only, w: 3, eps: 1}}]
"""
T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "streams.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture()
def config(config_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DPSTREAM_NOISE_KEY", "DPSTREAM_NOISE_KEY_FILE", "DPSTREAM_DEPLOYMENT"):
        monkeypatch.delenv(name, raising=False)
    return config_file


def _events(n: int, seed: int) -> list[tuple[str, float, str]]:
    rng = random.Random(seed)
    return [
        (f"u{rng.randrange(60)}", round(T0 + rng.uniform(0, 25 * SLOT_S), 3), rng.choice(LABELS))
        for _ in range(n)
    ]


def _model(events: list[tuple[str, float, str]]) -> dict[int, list[int]]:
    """The rules by hand: per slot, each user's earliest value, counted once."""
    first: dict[tuple[int, str], tuple[float, str]] = {}
    for user, ts, label in events:
        key = (int(ts // SLOT_S), user)
        if key not in first or ts < first[key][0]:
            first[key] = (ts, label)
    out: dict[int, list[int]] = {}
    for (slot, _), (_, label) in first.items():
        out.setdefault(slot, [0] * len(LABELS))[LABELS.index(label)] += 1
    return out


def _released(config: Path, events: list[tuple[str, float, str]]) -> list[run.Released]:
    stream = load_settings(config=config, env={}).stream("s")
    rows = sorted((Row(i, u, ts, v) for i, (u, ts, v) in enumerate(events, 2)), key=lambda r: r.ts)
    replay = run.Replay(stream, b"k" * 32, "test")
    return list(run.replay_rows(replay, rows, lambda bad: pytest.fail(str(bad))))


def test_counts_are_the_rules_and_every_slot_is_released(config: Path) -> None:
    events = _events(3000, seed=1)
    got = _released(config, events)
    model = _model(events)
    slots = [r.slot for r in got]
    assert slots == list(range(min(model), max(model) + 1))
    for r in got:
        assert r.exact.tolist() == model.get(r.slot, [0] * len(LABELS)), r.slot


def test_blocks_change_nothing(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events(2000, seed=2)
    whole = [
        (r.slot, r.release.histogram.tolist(), r.release.fresh) for r in _released(config, events)
    ]
    monkeypatch.setattr(run, "BLOCK", 37)  # slots closed between blocks, mid-file
    small = [
        (r.slot, r.release.histogram.tolist(), r.release.fresh) for r in _released(config, events)
    ]
    assert small == whole


def _csv(path: Path, events: list[tuple[str, float, str]]) -> Path:
    path.write_text("user,ts,value\n" + "".join(f"{u},{t!r},{v}\n" for u, t, v in events))
    return path


def test_the_file_order_changes_nothing_and_the_seed_repeats(config: Path, tmp_path: Path) -> None:
    events = _events(1500, seed=3)
    shuffled = events[:]
    random.Random(0).shuffle(shuffled)
    outs = []
    for name, rows, seed in (("a", events, "4"), ("b", shuffled, "4"), ("c", events, "5")):
        out = tmp_path / f"{name}.jsonl"
        argv = ["replay", "--events", str(_csv(tmp_path / f"{name}.csv", rows))]
        argv += ["--config", str(config), "--stream", "s", "--out", str(out), "--seed", seed]
        assert main([*argv, "--quiet"]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    assert outs[0] != outs[2]  # another seed, other noise
    lines = [json.loads(line) for line in outs[0].splitlines()]
    assert {"slot", "start", "histogram", "fresh", "spent_by_group"} <= set(lines[0])
    assert any(not r["fresh"] for r in lines), "bd at this eps skips some slots"


def test_the_deployment_key_is_the_services_noise(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.dp.noise import keyed_rng

    events = _events(300, seed=4)
    stream = load_settings(config=config, env={}).stream("s")
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", "ab" * 32)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "prod-1")
    out = tmp_path / "o.jsonl"
    argv = ["replay", "--events", str(_csv(tmp_path / "e.csv", events)), "--config", str(config)]
    assert main([*argv, "--stream", "s", "--out", str(out), "--quiet"]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    # Stepping a fresh mechanism by hand with the service's derivation gives the same first slot.
    mech = stream.build_mechanism()
    model = _model(events)
    first = lines[0]["slot"]
    counts = np.asarray(model[first]).reshape(1, -1)
    rng = keyed_rng(bytes.fromhex("ab" * 32), "s", first, "prod-1")
    rel = mech.step(counts, rng, [lv.population for lv in stream.levels])
    assert lines[0]["histogram"] == [float(x) for x in rel.histogram]


def test_refusals_are_one_line(config: Path, tmp_path: Path, capsys) -> None:
    events = tmp_path / "e.csv"
    events.write_text("user,ts,value\nu1,1700000000,a\nu2,soon,a\nu3,1700000001,zz\n")
    base = ["replay", "--events", str(events), "--config", str(config), "--quiet"]
    assert main([*base, "--stream", "dev"]) == 2
    assert "local stream" in capsys.readouterr().err
    assert main([*base, "--stream", "nope"]) == 2
    assert "no stream 'nope'" in capsys.readouterr().err
    assert main([*base, "--stream", "s", "--tz", "Mars/Olympus"]) == 2
    assert main([*base, "--stream", "s", "--events", str(tmp_path / "gone.csv")]) == 1
    capsys.readouterr()
    assert main([*base, "--stream", "s", "--seed", "1"]) == 0
    out, err = capsys.readouterr()
    named = [line for line in err.splitlines() if line.startswith("dpstream replay: line")]
    assert named == [
        "dpstream replay: line 3: bad_field: ts 'soon' is neither Unix seconds nor an ISO 8601 "
        "time (skipped)",
        "dpstream replay: line 4: out_of_domain: label not in the stream's labels (skipped)",
    ]
    assert "malformed rows (skipped): 2" in err
    assert len(out.splitlines()) == 1  # one slot, one JSON line on stdout


def test_help_says_what_it_does(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["replay", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for words in ("--events FILE", "--stream ID", "--out FILE", "exactly as the service", "--tz"):
        assert words in text
    with pytest.raises(SystemExit):
        main(["bench", "replay", "--help"])
    assert "--series" in capsys.readouterr().out


SUM_CONFIG = """
streams:
  - id: energy
    labels: [north, south, west]
    slot_s: 10
    grace_s: 1
    neighbours: add-remove
    sum: {alpha: 5}
    mechanism:
      name: optstream
      noise: laplace
      params: {sampling: none, postprocess: false}
    accept_weaker_guarantee: true
    levels: [{name: only, w: 4, eps: 1000}]
"""


def test_a_sum_stream_clips_and_a_period_mechanism_releases_every_slot(tmp_path: Path) -> None:
    path = tmp_path / "sums.yaml"
    path.write_text(SUM_CONFIG)
    stream = load_settings(config=path, env={}).stream("energy")
    rng = random.Random(5)
    lines, model = [], {}
    for _ in range(400):
        user, slot = f"u{rng.randrange(30)}", rng.randrange(170_000_000, 170_000_012)
        ts, value, amount = slot * 10.0 + rng.uniform(0, 9.9), rng.randrange(3), rng.uniform(0, 9)
        lines.append({"user": user, "ts": ts, "value": value, "amount": amount})
        first = model.setdefault(slot, {}).get(user)
        if first is None or ts < first[0]:  # one value per user per slot: the earliest
            model[slot][user] = (ts, value, min(amount, 5.0))
    lines.insert(9, {"user": "x", "ts": lines[0]["ts"], "value": 0, "amount": -1})
    rows = read_rows(io.StringIO("".join(json.dumps(x) + "\n" for x in lines)), "jsonl", UTC)
    bad: list[str] = []
    replay = run.Replay(stream, b"k" * 32, "test")
    ordered = sorted(rows, key=lambda r: r.ts)  # no bad row from the reader itself
    got = list(run.replay_rows(replay, ordered, lambda b: bad.append(str(b))))
    assert len(bad) == 1 and bad[0].startswith("line 10: bad_amount: ")  # the service's rule
    assert sorted(r.slot for r in got) == list(range(min(model), max(model) + 1))
    assert any(r.delayed for r in got)  # a period's earlier slots come at its end
    for r in got:
        want = np.zeros(3)
        for _, value, amount in model.get(r.slot, {}).values():
            want[value] += amount
        np.testing.assert_allclose(r.exact, want, rtol=1e-12)


EVENTS = st.lists(
    st.tuples(
        st.sampled_from([f"u{i}" for i in range(6)]),
        st.integers(0, 60_000).map(lambda ms: T0 + ms / 1000),
        st.sampled_from(LABELS[:4]),
    ),
    max_size=80,
)


@settings(max_examples=60, deadline=None)
@given(EVENTS, st.integers(1, 30))
def test_any_events_any_blocks_count_as_the_rules(
    config_file: Path, events: list, block: int
) -> None:
    stream = load_settings(config=config_file, env={}).stream("s")
    rows = sorted((Row(i, u, ts, v) for i, (u, ts, v) in enumerate(events, 2)), key=lambda r: r.ts)
    old, run.BLOCK = run.BLOCK, block
    try:
        got = list(run.replay_rows(run.Replay(stream, b"k" * 32, "t"), rows, pytest.fail))
    finally:
        run.BLOCK = old
    model = _model(events)
    assert [r.slot for r in got] == (list(range(min(model), max(model) + 1)) if model else [])
    assert {r.slot: r.exact.tolist() for r in got if any(r.exact)} == model
