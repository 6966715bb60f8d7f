"""The streams file's YAML mistakes are one line naming the file, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.stream.config import load_streams
from app.stream.errors import ConfigError

STREAM = (
    "streams:\n  - id: clicks\n    labels: [a, b]\n{extra}    levels: [{{name: s, w: 2, eps: 1}}]\n"
)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ('    slot_s: "2s"\n', r"slot_s must be a number, got '2s'"),
        ("    slot_s: [2]\n", r"slot_s must be a number, got \[2\]"),
        ("    slot_s: 2\n    grace_s: 1\n    slot_s: 3\n", r"line 6: duplicate key 'slot_s'"),
    ],
)
def test_a_bad_slot_or_a_repeated_key_is_one_config_error(
    tmp_path: Path, extra: str, match: str
) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text(STREAM.format(extra=extra))
    with pytest.raises(ConfigError, match=match) as info:
        load_streams(path, env={})
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_repeated_key_deeper_down_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text(STREAM.format(extra="    mechanism: {name: pba, name: bd}\n"))
    with pytest.raises(ConfigError, match="duplicate key 'name'"):
        load_streams(path, env={})


def test_the_verbs_say_it_in_one_line_with_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "streams.yaml"
    path.write_text(STREAM.format(extra='    slot_s: "2s"\n'))
    done = subprocess.run(
        [sys.executable, "-m", "app.stream", "produce", "--config", str(path), "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
