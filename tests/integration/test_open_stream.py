"""Issue 36, section 2 on a real broker: an open-domain stream releases keys nobody listed.

The stream runs ``open_uniform`` with one level, ``w = 2``, ``eps = 8``, ``delta = 1e-3``,
``max_keys = 1`` under replace (``Delta = 2``). Each slot spends ``eps_t = 4`` and
``delta_t = 5e-4``: the noise is discrete Laplace at rate ``gamma = 4 / 2 = 2`` (exact for the
sampler), ``a = e**-2``, and the threshold is (``docs/open-domain.md``)

    tau = 1 + ceil(ln(delta_t (1 + a) / Delta) / ln a) = 1 + ceil(4.08) = 6.

What the test asserts, and the probability that a correct worker fails it:

* a key :data:`USERS` = 30 users send is selected in its first slot unless ``Z <= 5 - 30``:
  ``a**25 / (1 + a) < 2e-22``;
* the key one user sends is released only if ``Z >= 5``: ``a**5 / (1 + a) < 4e-5`` a slot, so
  over the :data:`N_SLOTS` slots below ``3e-4``;
* a public key nobody sends any more is released (its count is ``Z``) and is quiet unless
  ``Z >= 6``, ``a**6 / (1 + a) < 6e-6`` a slot: it shows at the next
  ``retire_after = 2`` slots, is retired at the second, and is gone after;
* the eps and delta spent, summed over every window of ``w`` consecutive slots, stay within the
  level's (exact fractions): a correct worker never fails this.

The second test kills the worker (``kill -9``) right after the first test slot's release. The
restarted worker must continue the ledger (every window after the first slot holds exactly
``w`` slots' spending, ``eps`` and ``delta``) and the public set (``/launch``, which nobody
sends after the first slot, is still released at the next, then retired), and a slot it
publishes again must be byte for byte the same. Events sent while it was down may be late
(dropped and counted, as for labels streams), so ``/steady`` is only checked before the crash.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from pathlib import Path

import msgpack
import pytest

pytestmark = pytest.mark.integration

SLOT_S = 1.0
W = 2
EPS = Fraction(8)
DELTA = Fraction(1, 1000)
USERS = 30
N_SLOTS = 6
CONFIG = f"""
streams:
  - id: urls
    domain: open
    max_keys: 1
    retire_after: 2
    slot_s: {SLOT_S}
    grace_s: 0.3
    release_timeout_s: 1.5
    mechanism: {{name: open_uniform}}
    levels: [{{name: only, w: {W}, eps: {EPS}, delta: 1.0e-3, population: 1000}}]
"""


def event(user: str, ts: float, key: str) -> tuple[bytes, bytes]:
    body = {"stream": "urls", "user": user, "ts": ts, "value": key}
    return user.encode(), msgpack.packb(body)


def slot_events(k: int, slot: int) -> list[tuple[bytes, bytes]]:
    """Test slot ``k``: :data:`USERS` users send ``/steady`` at every slot; at the first slot
    as many others send ``/launch`` and one user sends ``/clinic-42``."""
    ts = slot * SLOT_S + 0.2
    items = [event(f"s{i}", ts + i / 1000, "/steady") for i in range(USERS)]
    if k == 0:
        items += [event(f"p{i}", ts + i / 1000, "/launch") for i in range(USERS)]
        items.append(event("lonely", ts + 0.05, "/clinic-42"))
    return items


def exact(text: str) -> Fraction:
    return Fraction(text)


def produce_slots(kafka, topic: str, slots: list[int], start_k: int = 0) -> None:
    """Each slot's events at 0.1 s into it (test slot ``start_k`` first)."""
    for k, slot in enumerate(slots, start_k):
        time.sleep(max(0.0, slot * SLOT_S + 0.1 - time.time()))
        kafka.produce(topic, slot_events(k, slot))


def wait_releases(kafka, topic: str, wanted: set[int], wait_s: float) -> list:
    """The ``releases`` messages once every slot of ``wanted`` is there (or ``wait_s`` ran
    out)."""
    deadline = time.monotonic() + wait_s
    msgs: list = []
    while time.monotonic() < deadline:
        time.sleep(1)
        msgs = kafka.read(topic, 1.0)
        if wanted <= {msgpack.unpackb(m.value())["slot"] for m in msgs}:
            break
    return msgs


def check_keys(by_slot: dict[int, dict], s: list[int], steady: bool = True) -> None:
    """The keys of the test slots ``s`` (see the module docstring); ``steady``: whether
    ``/steady``'s users reached every slot (not across a restart, which may lose data)."""
    for slot in s:
        rel = by_slot[slot]
        assert rel["schema"] == 2 and rel["mechanism"] == "open_uniform"
        assert rel["keys"] == sorted(rel["keys"]) and len(rel["keys"]) == len(rel["histogram"])
        assert rel["threshold"] == 6
        if steady or slot == s[0]:  # selected at the first slot, public after
            assert "/steady" in rel["keys"], slot
        assert "/clinic-42" not in rel["keys"], slot
    assert "/launch" in by_slot[s[0]]["new_keys"]
    assert "/launch" in by_slot[s[1]]["keys"] and "/launch" not in by_slot[s[1]]["new_keys"]
    assert "/launch" in by_slot[s[2]]["retired"]
    assert all("/launch" not in by_slot[slot]["keys"] for slot in s[3:])


def check_windows(records: list[dict], audits: list[dict]) -> None:
    """Every window of W consecutive releases, exactly: eps and delta within the level's; the
    audit's window figures agree (each slot spends eps / w and delta / w: a full window is
    exactly the level's, which a ledger forgotten in a restart would under-report)."""
    spent = sorted(
        (r["slot"], exact(r["spent_exact_by_group"]["only"]),
         exact(r["delta_spent_exact_by_group"]["only"]))
        for r in records
    )  # fmt: skip
    assert [b[0] - a[0] for a, b in zip(spent, spent[1:], strict=False)] == [1] * (len(spent) - 1)
    for i in range(len(spent)):
        window = spent[max(0, i - W + 1) : i + 1]
        assert sum(e for _, e, _ in window) <= EPS and sum(d for _, _, d in window) <= DELTA
    first = spent[0][0]
    for a in audits:
        eps = exact(a["window_spent_exact_by_group"]["only"])
        delta = exact(a["window_delta_spent_exact_by_group"]["only"])
        full = a["slot"] >= first + W - 1
        assert (eps, delta) == ((EPS, DELTA) if full else (EPS / W, DELTA / W)), a["slot"]
        assert a["delta_by_group"] == {"only": 1e-3}


def distinct(msgs: list) -> dict[int, dict]:
    """The releases by slot; a slot published again must be byte for byte the same."""
    raw: dict[int, bytes] = {}
    for m in msgs:
        slot = msgpack.unpackb(m.value())["slot"]
        assert raw.setdefault(slot, m.value()) == m.value(), f"slot {slot} differs"
    return {slot: msgpack.unpackb(v) for slot, v in raw.items()}


def test_an_open_stream_releases_selected_keys(kafka, worker_factory, tmp_path: Path) -> None:
    prefix = "open."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)

    first = math.floor(time.time() / SLOT_S) + 1
    s = list(range(first, first + N_SLOTS))
    produce_slots(kafka, prefix + "events", s)
    msgs = wait_releases(kafka, prefix + "releases", set(s), 20 + W * SLOT_S)
    audits = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "audit", 1.0)]
    metrics = worker.metrics()
    assert worker.stop() == 0, worker.tail()

    records = [msgpack.unpackb(m.value()) for m in msgs]
    assert len(records) == len({r["slot"] for r in records}), "every slot is released once"
    by_slot = {r["slot"]: r for r in records}
    assert set(s) <= set(by_slot), (s, sorted(by_slot))
    check_keys(by_slot, s)
    check_windows(records, audits)
    assert {a["slot"] for a in audits} >= set(s)
    assert metrics['dpstream_releases_total{kind="fresh",stream="urls"}'] >= N_SLOTS


def test_a_restart_continues_the_ledger_and_the_public_keys(
    kafka, worker_factory, tmp_path: Path
) -> None:
    prefix = "openkill."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)

    first = math.floor(time.time() / SLOT_S) + 1
    s = list(range(first, first + N_SLOTS))
    produce_slots(kafka, prefix + "events", s[:1])
    wait_releases(kafka, prefix + "releases", {first}, 20)
    worker.kill9()  # right after the first test slot's release
    worker.start()  # and on: events keep coming at their times, as a restart finds them
    produce_slots(kafka, prefix + "events", s[1:], 1)
    msgs = wait_releases(kafka, prefix + "releases", set(s), 60 + W * SLOT_S)
    audits = [msgpack.unpackb(m.value()) for m in kafka.read(prefix + "audit", 1.0)]
    assert worker.stop() == 0, worker.tail()

    by_slot = distinct(msgs)
    assert set(s) <= set(by_slot), (s, sorted(by_slot), worker.tail())
    check_keys(by_slot, s, steady=False)
    check_windows(list(by_slot.values()), audits)
