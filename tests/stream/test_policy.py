"""The bad-input policy (``app.stream.collect.policy``): dead-letter, count, log at most once per
reason."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from prometheus_client import CollectorRegistry, Counter

from app import metrics
from app.stream.collect import policy as policy_module
from app.stream.collect.policy import LOG_EVERY_S, Throttle, dead_letter_policy
from app.stream.errors import BadEvent
from app.stream.records import unpack


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Rec:
    topic: str = "events"
    partition: int = 3
    offset: int = 41
    key: bytes | None = b"u1"
    value: bytes | None = b"\xc1secret-ish"


def test_throttle_lets_one_line_per_key_per_interval_and_counts_the_rest():
    clock = Clock()
    throttle = Throttle(every_s=10.0, clock=clock)
    assert throttle("a") == 0
    assert throttle("b") == 0  # keys are independent
    clock.now += 9.9
    assert throttle("a") is None and throttle("a") is None
    clock.now += 0.1
    assert throttle("a") == 2  # two lines were held back
    assert throttle("a") is None
    clock.now += 10.0
    assert throttle("a") == 1


@pytest.fixture
def outcomes():
    return Counter("test_outcomes", "", ["stream", "outcome"], registry=CollectorRegistry())


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(policy_module, "Throttle", lambda: Throttle(LOG_EVERY_S, clock))
    return clock


def dead_letters(reason):
    return metrics.REGISTRY.get_sample_value("dpstream_dead_letters_total", {"reason": reason})


def test_the_default_policy_routes_counts_and_logs(outcomes, clock, caplog):
    sent = []
    policy = dead_letter_policy(lambda key, value: sent.append((key, value)), outcomes)
    log = logging.getLogger("test.policy")
    before = dead_letters("undecodable") or 0.0
    with caplog.at_level(logging.WARNING, logger="test.policy"):
        policy(BadEvent("undecodable", "ExtraData"), Rec(), log)
        policy(BadEvent("undecodable", "ExtraData"), Rec(offset=42), log)
        clock.now += LOG_EVERY_S
        policy(BadEvent("undecodable", "ExtraData"), Rec(offset=43), log)
    assert [k for k, _ in sent] == [b"u1"] * 3
    first = unpack(sent[0][1])
    assert (
        first["reason"],
        first["detail"],
        first["topic"],
        first["partition"],
        first["offset"],
        first["value"],
    ) == ("undecodable", "ExtraData", "events", 3, 41, b"\xc1secret-ish")
    assert [unpack(v)["offset"] for _, v in sent] == [41, 42, 43]
    assert dead_letters("undecodable") == before + 3
    assert outcomes.labels("", "invalid")._value.get() == 3
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "reason=undecodable topic=events partition=3 offset=41" in lines[0]
    assert lines[0].endswith("suppressed=0") and lines[1].endswith("suppressed=1")
    assert all("secret-ish" not in line for line in lines)  # never the rejected value


def test_each_reason_is_throttled_on_its_own(outcomes, clock, caplog):
    policy = dead_letter_policy(lambda key, value: None, outcomes)
    log = logging.getLogger("test.policy")
    with caplog.at_level(logging.WARNING, logger="test.policy"):
        policy(BadEvent("bad_time", "ts 1"), Rec(), log)
        policy(BadEvent("out_of_domain", "index"), Rec(), log)
        policy(BadEvent("bad_time", "ts 2"), Rec(), log)
    assert [("bad_time" in m, "out_of_domain" in m) for m in caplog.messages] == [
        (True, False),
        (False, True),
    ]
