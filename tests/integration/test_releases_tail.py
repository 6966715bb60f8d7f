"""``dpstream releases tail`` on a real broker: dedup, labels, JSON, schema check (issue 15), the
guarantee a record carries (issue 33)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import msgpack

from app.stream.topics import load_topics

YAML = """
streams:
  - id: web
    labels: [news, sport, video]
    slot_s: 60
    mechanism: {name: pba}
    levels: [{name: strict, w: 5, eps: 1.0}, {name: relaxed, w: 3, eps: 2.0}]
"""


GUARANTEE = {
    "eps": 1.0,
    "w": 5,
    "relation": "replace",
    "noise": "geometric",
    "weaker": False,
    "weaker_reason": None,
    "default_level": "strict",
    "levels": {"strict": {"eps": 1.0, "w": 5}, "relaxed": {"eps": 2.0, "w": 3}},
}
"""What the service writes for ``YAML``'s stream (``app.stream.records.guarantee``)."""


def _record(stream: str, slot: int, hist: list[float], **extra: object) -> bytes:
    return msgpack.packb(
        {
            "stream": stream,
            "slot": slot,
            "start": slot * 60.0,
            "end": slot * 60.0 + 60,
            "histogram": hist,
            "fresh": slot % 2 == 1,
            "mechanism": "pba",
            "spent_by_group": {"strict": 0.1, "relaxed": 0.2},
            "version": 1,
            "schema": 1,
            **extra,
        }
    )


def _tail(bootstrap: str, prefix: str, config, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DPSTREAM_BROKER": bootstrap,
        "DPSTREAM_TOPIC_PREFIX": prefix,
        "DPSTREAM_CONFIG": str(config),
    }
    return subprocess.run(  # noqa: S603 - our own interpreter and module
        [
            sys.executable,
            "-m",
            "app.cli",
            "releases",
            "tail",
            "-s",
            "web",
            "--idle-exit",
            "4",
            *flags,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_tail_dedups_labels_and_checks_the_schema(broker, kafka, tmp_path):
    prefix = "tail."
    config = tmp_path / "streams.yaml"
    config.write_text(YAML)
    kafka.create_topics(prefix)
    topic = load_topics(prefix).releases
    first = _record("web", 1, [10.5, -2.0, 3.25])
    kafka.produce(
        topic,
        [
            (b"web", first),
            (b"other", _record("other", 1, [1.0])),
            (b"web", _record("web", 2, [11.0, 0.0, 4.0])),
            (b"web", first),  # a crash's byte-identical copy
            (b"web", _record("web", 3, [9.0, 1.0, 2.0], guarantee=GUARANTEE)),
        ],
    )

    out = _tail(broker.bootstrap, prefix, config, "--from-beginning", "--json")
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [r["slot"] for r in rows] == [1, 2, 3]
    assert rows[0]["labels"] == ["news", "sport", "video"]
    assert rows[0]["histogram"] == [10.5, -2.0, 3.25]
    assert rows[0]["start_utc"] == "1970-01-01T00:01:00Z"
    assert "dropped 1 byte-identical duplicates" in out.stderr

    out = _tail(broker.bootstrap, prefix, config, "--from-beginning", "--wide")
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and len(lines) == 3, out.stderr
    assert lines[0] == (
        "web slot 1 1970-01-01T00:01:00Z..00:02:00Z fresh  pba | news=10.5 sport=-2.0 "
        "video=3.2 | spent strict=0.1 relaxed=0.2"
        " | guarantee not stated (a record written before the field)"
    )
    assert lines[2].endswith(
        " | guarantee levels strict eps=1 w=5 (default), relaxed eps=2 w=3, replace, "
        "noise geometric, DP as implemented"
    )
    assert rows[2]["guarantee"] == GUARANTEE and rows[0]["guarantee"] is None

    kafka.produce(topic, [(b"web", _record("web", 4, [1.0, 1.0, 1.0], schema=3))])
    out = _tail(broker.bootstrap, prefix, config, "--from-beginning")
    assert out.returncode == 1
    assert len(out.stdout.splitlines()) == 3  # the three readable slots, then the stop
    assert "schema 3 is newer than this reader's 2" in out.stderr


def test_unreachable_broker_is_one_line(tmp_path):
    config = tmp_path / "streams.yaml"
    config.write_text(YAML)
    out = _tail("127.0.0.1:1", "x.", config, "--broker-timeout", "1")
    assert out.returncode == 2
    assert out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1
    assert "127.0.0.1:1" in out.stderr


def test_reader_in_a_group_goes_on_where_it_stopped(broker, kafka):
    """The README's pipeline: a group member reads, closes, and a restart sees only new slots."""
    from app.client.releases import ReleaseReader

    prefix = "group."
    kafka.create_topics(prefix)
    topic = load_topics(prefix).releases
    kafka.produce(topic, [(b"web", _record("web", s, [1.0, 2.0, 3.0])) for s in (1, 2)])
    # A short session: the broker holds a join until the last member's session ends.
    config = {"bootstrap.servers": broker.bootstrap, "session.timeout.ms": 6000}

    def read_all(expect: int, max_s: float = 30.0) -> list[int]:
        slots: list[int] = []
        with ReleaseReader(config, topic, stream="web", group_id="pipe", from_beginning=True) as r:
            deadline = time.monotonic() + max_s
            while time.monotonic() < deadline and len(slots) < expect:
                rel = r.poll(0.5)
                if rel is not None:
                    slots.append(rel.slot)
            idle = time.monotonic() + 3  # nothing more comes
            while time.monotonic() < idle:
                rel = r.poll(0.5)
                if rel is not None:
                    slots.append(rel.slot)
        return slots

    assert read_all(2) == [1, 2]
    kafka.produce(topic, [(b"web", _record("web", 3, [1.0, 2.0, 3.0]))])
    assert read_all(1) == [3]
