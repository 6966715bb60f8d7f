"""Configuration: the packaged file loads; invalid files fail with a clear message."""

from __future__ import annotations

import pytest

from app.stream.config import DEFAULT_STREAMS, load_settings, load_streams, parse_noise_key
from app.stream.errors import ConfigError


def test_default_streams_file_loads():
    (s,) = load_streams(DEFAULT_STREAMS, env={})
    assert (s.id, s.d, s.mechanism, s.levels[s.default_level].name) == (
        "clicks",
        10,
        "pba",
        "strict",
    )


def test_environment_overrides_stream_fields():
    (s,) = load_streams(
        DEFAULT_STREAMS,
        env={"DPSTREAM_STREAM_CLICKS_SLOT_S": "5", "DPSTREAM_STREAM_CLICKS_MECHANISM": "bd"},
    )
    assert (s.slot_s, s.mechanism) == (5.0, "bd")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("streams: [", "not valid YAML"),
        ("streams: []", "non-empty `streams:`"),
        ("streams: [{id: 's s', d: 2, levels: [{name: a, w: 2, eps: 1}]}]", r"\.id must be"),
        ("streams: [{id: s, levels: [{name: a, w: 2, eps: 1}]}]", "give `labels`"),
        ("streams: [{id: s, d: 2, clock: moon, levels: [{name: a, w: 2, eps: 1}]}]", "clock"),
        (
            "streams: [{id: s, d: 2, mechanism: nope, levels: [{name: a, w: 2, eps: 1}]}]",
            "mechanism",
        ),
        ("streams: [{id: s, d: 2, levels: [{name: a, w: 0, eps: 1}]}]", r"levels\[0\] \(a\)"),
        ("streams: [{id: s, d: 2, slot_s: -1, levels: [{name: a, w: 2, eps: 1}]}]", "slot_s"),
        (
            "streams: [{id: s, d: 2, levels: [{name: a, w: 2, eps: 1, population: -3}]}]",
            r"levels\[0\] \(a\)\.population",
        ),
    ],
)
def test_invalid_files_name_the_field(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_streams(path, env={})


def test_secrets_never_show():
    env = {
        "DPSTREAM_NOISE_KEY": "ab" * 16,
        "DPSTREAM_DEPLOYMENT": "t",
        "DPSTREAM_KAFKA_SASL_PASSWORD": "hunter2",
    }
    settings = load_settings(env=env)
    assert "hunter2" not in repr(settings) and "abab" not in repr(settings)
    assert settings.require_noise_key() == bytes.fromhex("ab" * 16)
    with pytest.raises(ConfigError, match="at least 16 bytes"):
        parse_noise_key("abcd")
