"""The status page of an open-domain stream: the top keys per slot by released count, the
keys selected at a slot marked, each level's delta beside eps, keys escaped; and
``dpstream releases tail``'s lines for the same records."""

from __future__ import annotations

import json
import re
from argparse import Namespace
from fractions import Fraction
from pathlib import Path

import pytest

from app.dp.open.release import OpenWindowSpend
from app.stream.config import load_settings
from app.stream.ops import status
from app.tools.releases import COMPACT_WIDTH, _render, open_line, top_keys
from app.wire.releases import SlotRelease, decode, encode

YAML = """
streams:
  - id: urls
    domain: open
    slot_s: 10
    mechanism: open_uniform
    levels: [{name: std, w: 4, eps: 2.0, delta: 1.0e-3, population: 100000}]
"""


def record(slot: int, counts: dict[str, float], new: tuple[str, ...], fresh: bool = True):
    keys = tuple(sorted(counts))
    return SlotRelease(
        "urls",
        slot,
        slot * 10.0,
        slot * 10.0 + 10,
        tuple(counts[k] for k in keys),
        fresh,
        "open_uniform",
        {"std": 0.5},
        1,
        2,
        keys=keys,
        new_keys=new,
        status="publish" if fresh else "skip",
        threshold=12,
        retired=(),
        spent_exact_by_group={"std": "1/2"},
        delta_spent_by_group={"std": 2.5e-4},
        delta_spent_exact_by_group={"std": "1/4000"},
    )


@pytest.fixture
def stream(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(YAML)
    return load_settings(config=path, env={}).stream("urls")


def page_of(stream, records: list[SlotRelease]) -> str:
    board = status.StatusBoard()
    window = [OpenWindowSpend(4, 2.0, Fraction(3, 2), 1e-3, Fraction(3, 4000))]
    board.on_report(stream, window, [encode(r) for r in records])
    return board.render_page()


def test_the_page_draws_the_top_keys_per_slot(stream) -> None:
    many = {f"/p{i}": float(i) for i in range(15)}  # more keys than the page draws
    records = [
        record(7, {"/home": 40.0, "/search": 22.0, "/x": -3.0}, ("/home", "/search")),
        record(8, {"/home": 35.0, "/search": 25.0, "/new": 13.0, "/x": 1.0}, ("/new",)),
        record(9, {**many, "/home": 99.0}, (), fresh=False),
    ]
    page = page_of(stream, records)
    bars = re.findall(r"<title>slot (\d+) (\S+) = (-?[\d.]+)</title>", page)
    by_slot: dict[str, list[str]] = {}
    for slot, key, _ in bars:
        by_slot.setdefault(slot, []).append(key)
    assert by_slot["7"] == ["/home", "/search", "/x"]  # by released count, down
    assert by_slot["8"] == ["/home", "/search", "/new", "/x"]
    assert len(by_slot["9"]) == status.OPEN_TOP and by_slot["9"][:2] == ["/home", "/p14"]
    assert "/p0<" not in page and "/p4 " not in page  # below the top 10: not drawn
    assert "/new<b>+</b> 13" in page and "/home<b>+</b> 40" in page  # selected at that slot
    assert "/home<b>+</b> 35" not in page  # public at slot 8
    assert f"fill='{status.REPEAT_COLOR}'><title>slot 9 " in page
    assert "0.00075 of delta 0.001 (75%)" in page  # the level's delta beside eps
    assert "1.5 of eps 2" in page


def test_a_hostile_key_is_escaped_and_cut(stream) -> None:
    key = "<script>alert(1)</script>" + "z" * 80
    page = page_of(stream, [record(3, {key: 50.0}, (key,))])
    assert "<script" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "z" * 80 not in page.split("<title>")[0] + page.split("</title>")[-1]


def test_releases_tail_shows_an_open_streams_top_keys() -> None:
    r = decode(encode(record(8, {"/home": 35.0, "/search": 25.0, "/new": 13.0}, ("/new",))))
    assert top_keys(r, 2) == [("/home", 35.0), ("/search", 25.0)]
    line = open_line(r, 10)
    assert line.endswith("| /home=35 /search=25 /new+=13 | 3 keys, 1 new")
    wide = open_line(r, 2, wide=True)
    assert "threshold 12" in wide and "std eps=0.5 delta=0.00025" in wide
    many = record(9, {f"/a-long-path/{i:03d}": float(i) for i in range(30)}, ())
    cut = open_line(many, 30)
    assert len(cut) <= COMPACT_WIDTH and "--wide)" in cut and "/a-long-path/029=29" in cut
    args = Namespace(json=True, wide=False, top=2)
    out = json.loads(_render(r, None, args, False))
    assert out["top"] == [["/home", 35.0], ["/search", 25.0]]
    assert out["keys"] == ["/home", "/new", "/search"] and "labels" not in out
