"""``dpstream releases tail``: the compact line, its legend, and a stream seen nowhere (issue 23
item 12)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.client.releases import SlotRelease
from app.stream.config import DEFAULT_STREAMS, load_settings
from app.tools.releases import COMPACT_WIDTH, compact_line, format_line, legend

LOCAL_STREAMS = Path(__file__).parents[2] / "app" / "stream" / "local_streams.yaml"


def _release(stream: str, values: tuple[float, ...], fresh: bool = True) -> SlotRelease:
    return SlotRelease(
        stream,
        897718126,
        1795436252.0,
        1795436254.0,
        values,
        fresh,
        "pba",
        {"strict": 0.0125, "standard": 0.05, "relaxed": 0.2},
        1,
        1,
    )


def test_the_demo_streams_compact_line_fits_and_wide_keeps_everything() -> None:
    stream = load_settings({}, config=DEFAULT_STREAMS).streams[0]
    rel = _release(stream.id, (41.0, -16.0, 13.0, 19.0, 15.0, -54.0, 21.0, -49.0, 49.0, -5.0))
    line = compact_line(rel)
    assert len(line) <= COMPACT_WIDTH and "--wide" not in line
    assert line.startswith(f"{stream.id} 897718126 ") and line.split()[2].endswith("Z")
    wide = format_line(rel, tuple(stream.labels))
    assert len(wide) > COMPACT_WIDTH and "home=41.0" in wide and "spent strict=0.0125" in wide
    assert "home news sports" in legend(stream.id, tuple(stream.labels), stream.slot_s)


def test_local_frequencies_keep_three_decimals() -> None:
    line = compact_line(_release("app-usage", (0.412, 0.588)), frequencies=True)
    assert line.endswith("|  0.412  0.588")


def test_a_long_histogram_is_cut_with_a_pointer_to_wide() -> None:
    line = compact_line(_release("big", tuple(float(i) for i in range(100))))
    assert len(line) <= COMPACT_WIDTH and line.endswith(", --wide)")


@pytest.mark.integration
def test_a_stream_seen_nowhere_is_refused_naming_the_streams_seen(tmp_path: Path) -> None:
    """kcat-like: the topic holds releases of ``web`` only; ``-s nope`` (not configured either)
    exits 2 at once, naming ``web``; a configured stream without releases gets a note."""
    from confluent_kafka import Producer

    from app.stream.broker import EmbeddedBroker
    from app.stream.topics import create_topics, load_topics

    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as broker:
        topics = load_topics("")
        create_topics(topics, {"bootstrap.servers": broker.bootstrap})
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce(topics.releases, key=b"web", value=b"\x80")
        assert producer.flush(30) == 0
        env = {k: v for k, v in os.environ.items() if not k.startswith("DPSTREAM_")}
        env["DPSTREAM_BROKER"] = broker.bootstrap

        def tail(stream: str) -> subprocess.CompletedProcess[str]:
            argv = [
                sys.executable,
                "-m",
                "app.cli",
                "releases",
                "tail",
                "-s",
                stream,
                "--idle-exit",
                "2",
                "--config",
                str(LOCAL_STREAMS),
            ]
            return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

        start = time.monotonic()
        out = tail("nope")
        assert out.returncode == 2, out.stderr
        assert time.monotonic() - start < 30
        assert "no releases of stream 'nope'" in out.stderr
        assert "streams seen there: web" in out.stderr and "app-usage" in out.stderr
        out = tail("app-usage")
        assert out.returncode == 0, out.stderr
        assert "no releases of stream 'app-usage' on topic releases yet" in out.stderr
