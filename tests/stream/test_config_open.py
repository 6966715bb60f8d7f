"""Open-domain streams in the streams file (issue 36 section 1): parsed, built, refused."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.dp.open import OpenPBA, OpenUniform
from app.stream.config import load_streams
from app.stream.errors import ConfigError

URLS = (
    "{id: urls, domain: open, max_keys: 2, max_key_chars: 64, retire_after: 8, "
    "mechanism: open_uniform, levels: [{name: std, w: 10, eps: 1.0, delta: 1.0e-6, "
    "population: 5000}]}"
)


def load(tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return load_streams(path, env={})


def test_an_open_stream_loads_with_its_fields_and_builds_its_mechanism(tmp_path):
    [s] = load(tmp_path, f"streams: [{URLS}]")
    assert (s.is_open, s.domain, s.labels, s.d) == (True, "open", (), 0)
    assert (s.max_keys, s.max_key_chars, s.retire_after) == (2, 64, 8)
    assert s.levels[0].delta == 1e-6
    assert s.sensitivity == 4  # replace: both sides' max_keys keys
    m = s.build_mechanism()
    assert isinstance(m, OpenUniform)
    assert (m.max_keys, m.sensitivity, m.units, m.retire_after, m.max_key_chars) == (2, 2, 4, 8, 64)
    assert m.population == 5000
    assert s.unit is not None and s.unit.eps > 0  # the privacy unit's bound covers it


def test_the_defaults_and_the_adaptive_mechanism(tmp_path):
    text = (
        "streams: [{id: u, domain: open, neighbours: add-remove, mechanism: open_pba, "
        "levels: [{name: a, w: 8, eps: 4, delta: 1.0e-5, population: 10000}]}]"
    )
    [s] = load(tmp_path, text)
    assert (s.max_keys, s.max_key_chars, s.retire_after, s.sensitivity) == (1, 256, 16, 1)
    m = s.build_open()
    assert isinstance(m, OpenPBA) and m.units == 1
    [d] = load(tmp_path, text.replace("mechanism: open_pba, ", ""))
    assert d.mechanism == "open_uniform"  # an open stream's default


def test_a_labels_stream_is_unchanged(tmp_path):
    [s] = load(tmp_path, "streams: [{id: s, d: 3, levels: [{name: a, w: 2, eps: 1}]}]")
    assert (s.is_open, s.domain, s.levels[0].delta, s.sensitivity) == (False, "labels", 0.0, 2)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (("delta: 1.0e-6", "delta: 0.01"), r"\[urls\]\.mechanism: Level\.delta"),  # > MAX_DELTA
        (("population: 5000", "population: 100"), r"\[urls\].*population=100 is below"),
        (("domain: open,", "domain: open, mode: local,"), r"\[urls\]\.domain: .*central only"),
        (("domain: open,", "domain: open, labels: [a, b],"), r"\[urls\]\.labels: not for"),
        (("domain: open,", "domain: open, d: 4,"), r"\[urls\]\.d: not for"),
        (("domain: open,", "domain: open, max_values: 2,"), r"\.max_values: not for"),
        (("domain: open,", "domain: open, sum: {alpha: 1},"), r"\.sum: not for"),
        (("domain: open,", "domain: opne,"), r"\[urls\]\.domain must be one of"),
        (("mechanism: open_uniform", "mechanism: pba"), r"mechanism\.name must be one of"),
        (
            ("mechanism: open_uniform", "mechanism: {name: open_uniform, noise: laplace}"),
            r"\.mechanism\.noise: open streams",
        ),
        (("delta: 1.0e-6, ", ""), r"\[urls\]\.levels\[0\] \(std\): .*needs `delta`"),
        (("max_keys: 2", "max_keys: 0"), r"\[urls\]\.max_keys"),
        (("max_key_chars: 64", "max_key_chars: 5000"), r"\[urls\]\.max_key_chars"),
        (("retire_after: 8", "retire_after: 0"), r"\[urls\]\.retire_after"),
        (("delta: 1.0e-6", "delta: '1e-6'"), r"delta must be a number"),
        (
            ("mechanism: open_uniform", "mechanism: {name: open_uniform, params: {x: 1}}"),
            r"\[urls\]\.mechanism: .*x",
        ),
    ],
)
def test_what_an_open_stream_cannot_run_is_one_line_naming_it(tmp_path, change, match):
    old, new = change
    assert old in URLS
    with pytest.raises(ConfigError, match=match) as info:
        load(tmp_path, f"streams: [{URLS.replace(old, new)}]")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        ("{id: s, d: 2, levels: [{name: a, w: 2, eps: 1, delta: 1.0e-6}]}", r"\.delta: only"),
        ("{id: s, d: 2, max_keys: 2, levels: [{name: a, w: 2, eps: 1}]}", r"max_keys.*open"),
        ("{id: s, d: 2, retire_after: 2, levels: [{name: a, w: 2, eps: 1}]}", r"retire_after"),
    ],
)
def test_a_labels_stream_refuses_the_open_fields(tmp_path, stream, match):
    with pytest.raises(ConfigError, match=match):
        load(tmp_path, f"streams: [{stream}]")


def test_the_synthesized_default_level_takes_the_smallest_delta(tmp_path):
    text = (
        "streams: [{id: u, domain: open, levels: ["
        "{name: a, w: 20, eps: 2, delta: 1.0e-5, population: 9000}, "
        "{name: b, w: 10, eps: 1, delta: 1.0e-6, population: 9000}]}]"
    )
    [s] = load(tmp_path, text)
    default = s.levels[s.default_level]
    assert (default.w, default.eps, default.delta) == (20, 1, 1e-6)


@settings(max_examples=30, deadline=None)
@given(
    delta=st.floats(1e-9, 1e-2),
    eps=st.floats(0.05, 5.0),
    w=st.integers(1, 50),
    population=st.integers(1, 10**6),
    max_keys=st.integers(1, 5),
)
def test_a_stream_loads_exactly_when_its_mechanism_accepts_it(
    tmp_path_factory, delta, eps, w, population, max_keys
):
    """The config refuses exactly what the offline mechanism refuses (delta above 1e-3, a
    threshold above the population), never more, never less."""
    eps, delta = float(f"{eps:.6e}"), float(f"{delta:.6e}")  # as YAML reads them back
    text = (
        f"streams: [{{id: u, domain: open, max_keys: {max_keys}, levels: "
        f"[{{name: a, w: {w}, eps: {eps:.6e}, delta: {delta:.6e}, population: {population}}}]}}]"
    )
    try:
        OpenUniform(
            levels=[(w, eps, delta)], population=population, max_keys=max_keys, sensitivity=2
        )
        accepted = True
    except ValueError:
        accepted = False
    try:
        load(tmp_path_factory.mktemp("c"), text)
        loaded = True
    except ConfigError:
        loaded = False
    assert loaded == accepted
