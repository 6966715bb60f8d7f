"""``dpstream replay`` on an open-domain stream (``domain: open``): hand-computed releases and
summary at an eps so large the noise is nil, the ``max_keys`` bound, the file's order, and
hostile rows (hypothesis): never an exception, every row counted or named."""

from __future__ import annotations

import io
import json
import math
import random
from datetime import UTC
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from app.stream.config import load_settings
from app.tools.replay import run
from app.tools.replay.open import OpenReplay
from app.tools.replay.read import Row, read_rows
from app.tools.replay.summary import OpenUtility

SLOT_S = 10.0
T0 = 1_700_000_000.0  # a slot boundary: 170_000_000 * 10
CONFIG = """
streams:
  - id: urls
    domain: open
    slot_s: 10
    grace_s: 1
    max_keys: {max_keys}
    max_key_chars: 12
    mechanism: open_uniform
    levels: [{{name: std, w: 2, eps: {eps}, delta: 1.0e-3, population: 100000}}]
"""


def stream_of(tmp_path: Path, max_keys: int = 1, eps: float = 1000.0):
    path = tmp_path / f"open-{max_keys}-{eps}.yaml"
    path.write_text(CONFIG.format(max_keys=max_keys, eps=eps))
    return path, load_settings(config=path, env={}).stream("urls")


def replay(stream, rows: list[Row], bad=None) -> list[run.OpenReleased]:
    ordered = sorted(rows, key=lambda r: r.ts)
    on_bad = bad if bad is not None else (lambda b: pytest.fail(str(b)))
    got = list(run.replay_rows(OpenReplay(stream, b"k" * 32, "test"), ordered, on_bad))
    assert all(isinstance(r, run.OpenReleased) for r in got)
    return got  # type: ignore[return-value]


def test_no_noise_releases_the_keys_at_the_threshold_and_keeps_public_ones(tmp_path: Path) -> None:
    """eps = 1000 over w = 2: each slot's noise is 0 (P(Z != 0) ~ e^-250), so a slot releases
    exactly the keys of at least tau users (tau = 2, the least there is), and the next slot the
    public keys whether sent or not."""
    _, stream = stream_of(tmp_path)
    assert stream.build_open().tau == 2
    sent = ["home"] * 5 + ["search"] * 3 + ["clinic-42"]
    rows = [Row(i, f"u{i}", T0 + i * 0.5, key) for i, key in enumerate(sent)]
    rows += [Row(20 + i, f"u{i}", T0 + SLOT_S + 1, "home") for i in range(2)]
    first, second = replay(stream, rows)
    assert (first.slot, second.slot) == (170_000_000, 170_000_001)
    assert first.exact == {"home": 5, "search": 3, "clinic-42": 1}
    assert first.release.histogram() == {"home": 5, "search": 3}  # one user's key: never
    assert first.release.new.tolist() == [True, True]
    assert second.release.histogram() == {"home": 2, "search": 0}  # search: public, unsent
    assert not second.release.new.any()
    line = second.line(stream)
    assert line["counts"] == {"home": 2, "search": 0} and line["new_keys"] == []
    assert line["spent_by_group"] == {"std": 500.0}  # eps / w
    assert line["delta_spent_by_group"] == {"std": pytest.approx(5e-4)}  # delta / w
    assert line["window_delta_spent_by_group"] == {"std": pytest.approx(1e-3)}
    # The summary, by hand: MAE over the union (1/3, then 0), recall@k (2/3, then 1), the
    # released top-k all true (1, 1), released keys someone sent (1, then 1/2).
    u = OpenUtility(stream)
    for r in (first, second):
        u.add(r)
    text = "\n".join(u.lines(run.Tally()))
    assert "MAE over true and released keys: 0.167" in text
    assert "top-10 recall 0.833 precision 1.000" in text
    assert "top-100 recall 0.833 precision 1.000" in text
    assert "released keys someone sent (precision): 0.750" in text
    assert "largest window spend eps 1000 delta 0.001" in text


def test_each_user_counts_for_at_most_max_keys(tmp_path: Path) -> None:
    _, stream = stream_of(tmp_path, max_keys=2)
    rng = random.Random(1)
    rows = []
    for i in range(400):  # 40 users, each several keys in one slot, some repeated
        user = f"u{i % 40}"
        rows.append(Row(i, user, T0 + rng.uniform(0, 9.9), f"k{rng.randrange(6)}"))
    (only,) = replay(stream, rows)
    sent = {}
    for r in rows:
        sent.setdefault(r.user, set()).add(r.value)
    assert sum(only.exact.values()) == sum(min(2, len(keys)) for keys in sent.values())
    for key, count in only.exact.items():
        assert count <= sum(key in keys for keys in sent.values())
    assert only.release.histogram() == {k: c for k, c in only.exact.items() if c >= 2}


def test_file_order_changes_nothing_and_keys_that_look_like_numbers_stay_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DPSTREAM_NOISE_KEY", "DPSTREAM_NOISE_KEY_FILE", "DPSTREAM_DEPLOYMENT"):
        monkeypatch.delenv(name, raising=False)
    config, _ = stream_of(tmp_path, max_keys=1, eps=2.0)
    rng = random.Random(2)
    events = [
        (f"u{rng.randrange(300)}", T0 + rng.uniform(0, 60), str(rng.choice([7, 42, 42, 42])))
        for _ in range(2000)
    ]
    shuffled = events[:]
    random.Random(0).shuffle(shuffled)
    outs = []
    for name, rows in (("a", events), ("b", shuffled)):
        path = tmp_path / f"{name}.csv"
        path.write_text("user,ts,value\n" + "".join(f"{u},{t!r},{v}\n" for u, t, v in rows))
        out = tmp_path / f"{name}.jsonl"
        argv = ["replay", "--events", str(path), "--config", str(config), "--stream", "urls"]
        assert main([*argv, "--out", str(out), "--seed", "3", "--quiet"]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    lines = [json.loads(line) for line in outs[0].splitlines()]
    assert len(lines) == 6 and {"42"} <= set(lines[0]["counts"])  # a key, not an index
    assert lines[0]["new_keys"] == sorted(lines[0]["new_keys"])


HOSTILE_KEYS = st.one_of(
    st.text(max_size=20),
    st.integers(-5, 5),
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.floats(allow_nan=True),
)
HOSTILE = st.lists(
    st.fixed_dictionaries(
        {
            "user": st.one_of(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 3)),
            "ts": st.one_of(
                st.floats(T0, T0 + 40), st.sampled_from(["soon", "2023-11-14T22:13:25Z"])
            ),
            "value": HOSTILE_KEYS,
        }
    ),
    max_size=40,
)


@pytest.fixture(scope="module")
def hostile_stream(tmp_path_factory: pytest.TempPathFactory):
    return stream_of(tmp_path_factory.mktemp("h"), max_keys=1)[1]


@settings(max_examples=150, deadline=None)
@given(objs=HOSTILE)
def test_hostile_rows_are_counted_or_named_never_raised(hostile_stream, objs: list) -> None:
    stream = hostile_stream
    text = "".join(json.dumps(o) + "\n" for o in objs)
    bad: list = []
    rows = [r for r in read_rows(io.StringIO(text), "jsonl", UTC) if isinstance(r, Row)]
    got = replay(stream, rows, bad.append)
    reasons = {b.reason for b in bad}
    assert reasons <= {"wrong_type", "key_too_long", "bad_time", "undecodable"}, reasons
    valid = [
        r for r in rows if isinstance(r.value, str) and 0 < len(r.value) <= stream.max_key_chars
    ]
    assert len(bad) == len(rows) - len(valid)  # each refused row named once
    by_slot: dict[int, set[str]] = {}
    for r in valid:
        by_slot.setdefault(math.floor(r.ts / SLOT_S), set()).add(r.user)
    for r in got:
        assert sum(r.exact.values()) == len(by_slot.get(r.slot, ()))  # one key per user
