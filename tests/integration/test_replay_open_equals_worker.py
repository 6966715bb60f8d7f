"""``dpstream replay`` equals the worker on open-domain streams, ``open_uniform`` and a two-level
``open_pba``, over the real broker (issue 36 §3, "replay equal to the worker on the same events").

One worker serves two open streams on the same events: ``ou`` (``open_uniform``, one level) and
``op`` (``open_pba``, levels ``strict`` and ``relaxed``), both ``max_keys: 2``,
``retire_after: 2``, ``max_key_chars: 24``. The test sends, at once and in time order, the
events of slots ``k = 0 .. 5`` after a future slot ``first`` (``k = 2`` empty, no event at all),
under keys nobody listed:

* 30 *steady* users send ``/home`` and ``/search`` (exactly ``max_keys``) at every event slot,
  a third of them ``/home`` twice (a duplicate: one value);
* 10 *greedy* users send ``/home``, ``/search`` and a key of their own (3 > ``max_keys``): the
  ingest's keyed bound drops one of the three, salted per slot, so the hot keys' counts are the
  bound's, and the replay must drop the same ones;
* 30 *leaving* users send ``/menü`` at ``k = 0, 1`` only: public from ``k = 1``, then quiet;
* 30 *newcomers* send ``404`` (a key that looks like a number: a CSV must keep it a string) at
  ``k = 4, 5``: a key nobody listed, first seen late;
* one event's key is 25 characters long (dead-lettered by both, ``key_too_long``).

Once the worker released ``first + 10``, the same events go to ``dpstream replay`` as one CSV
file, rows shuffled, times in two other zones (half with a ``+05:30`` offset, half naive, read
in ``--tz America/Sao_Paulo``), plus a malformed row, under the worker's noise key and
deployment, from the worker's first released slot to its last. For each stream every slot must
be the worker's ``releases`` record (decoded by :func:`app.wire.releases.decode`): keys and
their counts, new keys, fresh and status, threshold, retired keys, eps and delta spent per
level, start and end. A replay under another deployment must release other counts.

Why selection and retirement happen (derived, not tuned). Neighbours are ``replace`` (the
default), so a user moves ``Delta = 2 max_keys = 4`` counts. ``ou`` spends ``eps_t = 16/4 = 4``
and ``delta_t = 1e-4/4`` per slot; ``op`` selects at half the strictest per-slot eps,
``0.5 min(32/4, 32/2) = 4``, and ``delta_t = min(1e-4/4, 1e-4/2)``: the same ``eps_t = 4``,
``delta_t = 2.5e-5`` in both. The noise is discrete Laplace at ``gamma = eps_t / Delta = 1``
(``a = e^-1``, ``P(Z >= m) = a^m / (1 + a)``), and the threshold is the smallest ``tau`` with
``Delta a^(tau-1) / (1 + a) <= delta_t``: ``tau - 1 = ceil(ln(2.5e-5 (1 + a) / 4) / -1) =
ceil(11.67) = 12``, ``tau = 13`` (asserted from the records). Each of ``/home``, ``/search``,
``/menü``, ``404`` has a bounded count >= 30 where it is sent (steady users hold exactly
``max_keys`` keys, so the bound keeps theirs), so it misses selection with probability
``P(Z <= 12 - 30) = a^18 / (1 + a) < 1.2e-8``. In ``ou`` (fresh counts every slot) ``/menü``
is released below ``tau`` at ``k = 2`` and ``k = 3`` unless ``Z >= 13`` (``< 1.7e-6`` each)
and retires at ``k = 3``, while the hot keys, sent again at ``k = 3``, are released at or
above ``tau`` unless ``Z <= -18``: they stay public (failure below ``1e-5`` in all). ``op``
repeats a public key's last count while it skips or is nullified, so when ``/menü`` retires
depends on the noise (``k = 3`` when the empty slot publishes and the next is nullified, else
after the next publication, at most ``w - 1 = 3`` nullified slots later; the run waits until
``k = 10``); the test asserts that it retires, not when. A one-user key (a greedy user's own)
passes ``tau`` with probability ``P(Z >= 12) < 4.5e-6``; it is not asserted on.
"""

from __future__ import annotations

import csv
import json
import math
import random
import time
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import msgpack
import pytest

from app.cli import main
from app.stream.collect.partitioning import PRODUCER_CONFIG
from app.wire.releases import SlotRelease, decode
from tests.integration.conftest import NOISE_KEY_HEX
from tests.integration.load import releases_by_slot

pytestmark = pytest.mark.integration

SLOT_S = 1.0
TAU = 13
HOT = ("/home", "/search")
LEAVING, NEW = "/menü", "404"
CONFIG = f"""
streams:
  - id: ou
    domain: open
    slot_s: {SLOT_S}
    grace_s: 0.3
    max_keys: 2
    max_key_chars: 24
    retire_after: 2
    mechanism: open_uniform
    levels: [{{name: std, w: 4, eps: 16, delta: 1.0e-4, population: 1000}}]
  - id: op
    domain: open
    slot_s: {SLOT_S}
    grace_s: 0.3
    max_keys: 2
    max_key_chars: 24
    retire_after: 2
    mechanism: open_pba
    levels:
      - {{name: strict, w: 4, eps: 32, delta: 1.0e-4, population: 500}}
      - {{name: relaxed, w: 2, eps: 32, delta: 1.0e-4, population: 500}}
"""
STREAMS = ("ou", "op")
EVENT_SLOTS = (0, 1, 3, 4, 5)
WAIT_K = 10
IST = timezone(timedelta(hours=5, minutes=30))
SAO_PAULO = "America/Sao_Paulo"


def _events(first: int, rng: random.Random) -> list[tuple[str, float, str]]:
    """``(user, ts, key)`` of the scenario in the module docstring, in time order; ts on the
    millisecond, at least 0.1 s inside its slot; a duplicate 0.3 s or more after the first."""
    out: list[tuple[str, float, str]] = []

    def send(user: str, slot: int, keys: list[str]) -> None:
        for i, key in enumerate(keys):
            out.append((user, round(slot * SLOT_S + 0.1 + 0.1 * i + 0.1 * rng.random(), 3), key))

    for k in EVENT_SLOTS:
        slot = first + k
        for u in range(30):
            send(f"steady{u}", slot, rng.sample(HOT, 2))
            if u % 3 == 0:
                out.append((f"steady{u}", round(slot * SLOT_S + 0.8, 3), HOT[0]))
        for u in range(10):
            keys = [*HOT, f"/own/{u}/{k}"]
            rng.shuffle(keys)
            send(f"greedy{u}", slot, keys)
        if k in (0, 1):
            for u in range(30):
                send(f"leaving{u}", slot, [LEAVING])
        if k in (4, 5):
            for u in range(30):
                send(f"new{u}", slot, [NEW])
    out.append(("greedy0", round((first + 1) * SLOT_S + 0.7, 3), "/" + "x" * 24))  # too long
    return sorted(out, key=lambda e: e[1])


def _write_csv(path: Path, events: list[tuple[str, float, str]], rng: random.Random) -> int:
    """The events as a CSV file, shuffled, half the times ``+05:30``, half naive in São Paulo,
    with one malformed row; the malformed row's line number."""
    rows = events[:]
    rng.shuffle(rows)
    zone = ZoneInfo(SAO_PAULO)
    bad_line = 0
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["user", "ts", "value"])
        for i, (user, ts, key) in enumerate(rows):
            if i % 2:
                at = datetime.fromtimestamp(ts, IST).isoformat()
            else:  # naive: read in --tz
                at = datetime.fromtimestamp(ts, zone).replace(tzinfo=None).isoformat()
            w.writerow([user, at, key])
            if i == 17:
                w.writerow(["steady1", "yesterday", HOT[0]])
                bad_line = i + 3  # the header is line 1, row i is line i + 2
    return bad_line


def _wait_released(kafka: Any, topic: str, last: int, timeout_s: float) -> None:
    """Wait (at most ``timeout_s``) until both streams released ``last`` or later. Reads stop
    after 0.3 s without a record: the live worker writes one per stream and second, which
    would keep :func:`~tests.integration.load.wait_released`'s 1 s reads going to their end."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        top: dict[str, int] = {}
        for m in kafka.read(topic, idle_s=0.3):
            rec = msgpack.unpackb(m.value())
            top[rec["stream"]] = max(top.get(rec["stream"], rec["slot"]), rec["slot"])
        if all(top.get(sid, last - 1) >= last for sid in STREAMS):
            return
        time.sleep(0.5)


def _served(rec: SlotRelease) -> dict[str, Any]:
    """What a replay line must match, from the worker's decoded record."""
    assert rec.keys is not None and rec.spent_exact_by_group is not None
    assert rec.delta_spent_exact_by_group is not None
    exact = {n: float(Fraction(x)) for n, x in rec.spent_exact_by_group.items()}
    delta = {n: float(Fraction(x)) for n, x in rec.delta_spent_exact_by_group.items()}
    assert exact == rec.spent_by_group and delta == rec.delta_spent_by_group
    return {
        "keys": list(rec.keys),
        "counts": rec.key_counts(),
        "new_keys": list(rec.new_keys or ()),
        "retired": list(rec.retired or ()),
        "threshold": rec.threshold,
        "fresh": rec.fresh,
        "status": rec.status,
        "spent_by_group": rec.spent_by_group,
        "delta_spent_by_group": rec.delta_spent_by_group,
        "start": rec.start,
        "end": rec.end,
        "mechanism": rec.mechanism,
    }


def _replayed(line: dict[str, Any]) -> dict[str, Any]:
    return {"keys": list(line["counts"]), **line}


def _replay(argv: list[str], out: Path) -> dict[int, dict[str, Any]]:
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    return {r["slot"]: r for r in map(json.loads, out.read_text().splitlines())}


def test_replay_of_open_uniform_and_pba_releases_what_the_worker_released(
    kafka,
    worker_factory,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    from confluent_kafka import Producer

    prefix = "replayopen2."
    config = tmp_path / "streams.yaml"
    config.write_text(CONFIG)
    kafka.create_topics(prefix)
    worker = worker_factory(prefix, config).start()
    worker.wait_ready(90)
    rng = random.Random(3602)
    first = math.floor(time.time() / SLOT_S) + 4  # ahead of the worker's first release
    events = _events(first, rng)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 5, **PRODUCER_CONFIG})
    for user, ts, key in events:
        for sid in STREAMS:
            ev = msgpack.packb({"stream": sid, "user": user, "ts": ts, "value": key})
            producer.produce(prefix + "events", key=user.encode(), value=ev)
    assert producer.flush(30) == 0
    last = first + WAIT_K
    time.sleep(max(0.0, (last + 1) * SLOT_S + 0.5 - time.time()))  # no read before it is due
    _wait_released(kafka, prefix + "releases", last, timeout_s=60)
    assert worker.stop() == 0, worker.tail()

    path = tmp_path / "events.csv"
    bad_line = _write_csv(path, events, rng)
    monkeypatch.setenv("DPSTREAM_NOISE_KEY", NOISE_KEY_HEX)
    monkeypatch.setenv("DPSTREAM_DEPLOYMENT", f"it-{prefix}")
    for sid in STREAMS:
        payloads = releases_by_slot(kafka, prefix + "releases", sid)
        assert all(len(p) == 1 for p in payloads.values()), f"{sid}: each slot released once"
        served = {s: _served(decode(next(iter(p)))) for s, p in payloads.items()}
        w0, w1 = min(served), max(served)
        assert w0 < first and last <= w1, (sid, w0, first, last, w1)

        span = ["--from", str(w0 * SLOT_S), "--to", str(w1 * SLOT_S + 0.5)]
        argv = ["replay", "--events", str(path), "--config", str(config), "--stream", sid]
        argv += [*span, "--tz", SAO_PAULO]
        capsys.readouterr()
        lines = _replay(argv, tmp_path / f"{sid}.jsonl")
        err = capsys.readouterr().err
        assert f"line {bad_line}: bad_field: ts 'yesterday'" in err, err
        assert "key_too_long" in err, err
        assert sorted(lines) == list(range(w0, w1 + 1)), sid
        replayed = {s: _replayed(line) for s, line in lines.items()}
        wrong = {
            s: {f: (v, replayed[s][f]) for f, v in rec.items() if v != replayed[s][f]}
            for s, rec in served.items()
        }
        assert {s: d for s, d in wrong.items() if d} == {}, sid

        # the scenario happened (probabilities in the module docstring)
        assert {r["threshold"] for r in served.values()} == {TAU}, sid
        new = {key: s - first for s, r in served.items() for key in r["new_keys"]}
        assert {*HOT, LEAVING, NEW} <= set(new), (sid, new)
        assert new[NEW] == 4 and set(served[first]["new_keys"]) >= {*HOT, LEAVING}, (sid, new)
        retired = {key: s - first for s, r in served.items() for key in r["retired"]}
        assert LEAVING in retired, (sid, retired)
        if sid == "ou":  # /menü retires at k = 3; the hot keys, sent again, stay public
            assert retired[LEAVING] == 3 and not set(HOT) & set(served[first + 3]["retired"])
            assert set(HOT) <= set(served[first + 4]["keys"]) - set(served[first + 4]["new_keys"])
        fresh = sum(r["fresh"] for r in served.values())
        with capsys.disabled():
            print(
                f"\n{sid}: slots {w0}..{w1} equal (events in {first}..{first + 5}); new {new}; "
                f"retired {retired}; fresh {fresh}/{len(served)}"
            )

        monkeypatch.setenv("DPSTREAM_DEPLOYMENT", "elsewhere")
        other = _replay(argv, tmp_path / f"{sid}-other.jsonl")
        monkeypatch.setenv("DPSTREAM_DEPLOYMENT", f"it-{prefix}")
        assert [other[s]["counts"] for s in sorted(other)] != [
            replayed[s]["counts"] for s in sorted(replayed)
        ], sid
