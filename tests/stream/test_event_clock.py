"""Event-time clocks that cannot run away (issue 31, section 2; docs/design.md invariant 7).

No broker: the release agent on in-memory tables at a clock the tests move, and the collect
stage's :class:`~app.stream.collect.events.Collector` feeding it, so a whole pipeline runs here:

* whatever the ticks and partials claim, no slot closes before its stream's edge (an
  event-time slot: its due time plus the allowed skew on the wall), and one message closes at
  most :data:`~app.stream.release.central.MAX_CLOSES_PER_PASS` slots (property-based);
* a stream heard once and then idle for ten minutes never forces a slot, and the wall-clock
  stream on the same agent releases every slot on time;
* a producer stamping events 59 s ahead cannot move its partition's clock: the honest values of
  the same partition are all counted, and an idle partition follows the slowest active one;
* a tick claiming progress ahead is capped and named by readiness; releases ahead of or behind
  a stream's clock are named by readiness.
"""

from __future__ import annotations

import math

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app import metrics
from app.stream.collect.events import Collector, Record
from app.stream.collect.partitioning import partition_for
from app.stream.collect.watermark import IDLE_S
from app.stream.config import load_settings
from app.stream.internal import Partial, Tick
from app.stream.release.central import MAX_CLOSES_PER_PASS
from app.stream.worker import lagging
from tests.stream.agent import agent, run, sized_topics

PARTITIONS = 2
T0 = 1_800_000_000.0
"""The wall clock at the start of each scenario (a slot boundary)."""
YAML = """
streams:
  - id: rec
    labels: [a, b, c, d]
    slot_s: 1
    grace_s: 0.3
    clock: event
    release_timeout_s: 2
    max_delay_s: 15
    mechanism: {name: uniform}
    levels: [{name: only, w: 2, eps: 900}]
  - id: live
    labels: [a, b, c, d]
    slot_s: 1
    grace_s: 0.3
    release_timeout_s: 2
    mechanism: {name: uniform}
    levels: [{name: only, w: 2, eps: 900}]
"""


@pytest.fixture(scope="module")
def settings_file(tmp_path_factory):
    """The streams file (read-only: each test builds its own agent from it)."""
    path = tmp_path_factory.mktemp("clock") / "streams.yaml"
    path.write_text(YAML)
    return path


def make_agent(settings_file):
    """A release agent over dicts, and the list of ``(topic, value)`` it produced."""
    env = {"DPSTREAM_NOISE_KEY": "cd" * 16, "DPSTREAM_DEPLOYMENT": "test"}
    config = load_settings(env=env, config=settings_file)
    sent: list[tuple[str, bytes]] = []

    async def produce(topic, key, value):
        sent.append((topic, value))

    return agent(config, {}, {}, produce, sized_topics(events=PARTITIONS)), sent


def releases(sent, sid):
    out = [msgpack.unpackb(v) for t, v in sent if t == "releases"]
    return [r for r in out if r["stream"] == sid]


def timeouts(sid):
    return metrics.SLOT_TIMEOUTS.labels(sid)._value.get()


def assert_on_the_clock(r, sent):
    """Every release happened at or after its stream's edge allowed it."""
    for sid in ("rec", "live"):
        clock = r.settings.stream(sid).slots
        kind = r.settings.stream(sid).clock
        early = [
            x["slot"]
            for x in releases(sent, sid)
            if clock.due(x["slot"]) > clock.edge(x["released_at"], kind) + 1e-9
        ]
        assert early == [], f"{sid}: released before the stream's clock allowed: {early}"


# -- the agent alone: any messages -----------------------------------------------------------

message = st.one_of(
    st.tuples(
        st.just("tick"),
        st.sampled_from(["rec", "live"]),
        st.dictionaries(st.integers(0, PARTITIONS - 1), st.floats(-3_600.0, 60.0), min_size=1),
    ),
    st.tuples(
        st.just("partial"),
        st.sampled_from(["rec", "live"]),
        st.integers(-200, 60),
        st.integers(0, PARTITIONS - 1),
        st.lists(st.integers(0, 3), min_size=4, max_size=4),
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.floats(0.0, 90.0), message),
        min_size=1,
        max_size=40,
    )
)
def test_no_message_closes_a_slot_before_its_clock_or_runs_a_pass_away(settings_file, steps):
    """Random ticks and partials (progress and slots from an hour behind to the horizon,
    relative to the wall clock), at random wall-clock steps: no slot closes before its edge,
    and each message closes at most MAX_CLOSES_PER_PASS slots, so every pass returns."""
    r, sent = make_agent(settings_file)
    now = T0
    for dt, msg in steps:
        now += dt
        if msg[0] == "tick":
            _, sid, progress = msg
            raw = Tick(sid, {p: now + t for p, t in progress.items()}, PARTITIONS).encode()
        else:
            _, sid, ahead, p, counts = msg
            raw = Partial(sid, math.floor(now) + ahead, p, PARTITIONS, counts).encode()
        before = len([t for t, _ in sent if t == "releases"])
        run(r, raw, now)
        assert len([t for t, _ in sent if t == "releases"]) - before <= MAX_CLOSES_PER_PASS
    assert_on_the_clock(r, sent)


def test_a_stream_heard_once_then_idle_forces_nothing_and_stalls_nobody(settings_file):
    """The issue's runaway: about 60 s after the agent first heard an event-clock stream,
    every open slot was forced and the close loop never returned. Here the replay (two
    minutes behind) is heard, then only ticked for ten minutes beside a live wall stream."""
    r, sent = make_agent(settings_file)
    forced = timeouts("rec")
    replay = T0 - 120.0
    run(r, Tick("rec", dict.fromkeys(range(PARTITIONS), replay), PARTITIONS).encode(), T0)
    for i in range(1, 600 * 4):
        now = T0 + i / 4
        run(r, Tick("rec", dict.fromkeys(range(PARTITIONS), replay), PARTITIONS).encode(), now)
        if i % 4 == 2:  # the live stream's collect stage closes its last slot, then ticks
            slot = math.floor(now - 0.3) - 1
            for p in range(PARTITIONS):
                run(r, Partial("live", slot, p, PARTITIONS, [1, 0, 0, 1]).encode(), now)
            run(r, Tick("live", dict.fromkeys(range(PARTITIONS), now), PARTITIONS).encode(), now)
    rec = releases(sent, "rec")
    assert timeouts("rec") == forced, "nothing forced: the replay's clock never passed a slot"
    assert rec and max(x["slot"] for x in rec) < replay, "no slot past the replay's progress"
    live = releases(sent, "live")
    assert [x["slot"] for x in live] == list(range(live[0]["slot"], live[-1]["slot"] + 1))
    assert live[-1]["slot"] >= math.floor(T0 + 600) - 3, "the wall stream went on to the end"
    late = [x["slot"] for x in live if x["released_at"] > x["end"] + 0.3 + 1.0]
    assert late == [], f"live slots released late: {late}"
    assert_on_the_clock(r, sent)


def test_a_tick_claiming_progress_ahead_is_capped_and_named(settings_file):
    """A forged tick claiming 59 s ahead (inside the horizon) for every partition, each second
    between the honest collect stages' flushes: it closes nothing before its edge (uncapped it
    would close every slot up to a minute ahead, and the honest partials would all be late);
    the honest partials are counted; readiness names the stream for SHOW_S seconds."""
    r, sent = make_agent(settings_file)
    late = metrics.LATE_PARTIALS.labels("rec")._value.get()
    run(r, Tick("rec", dict.fromkeys(range(PARTITIONS), T0 - 70.0), PARTITIONS).encode(), T0)
    for i in range(1, 21):
        now = T0 + i
        slot = math.floor(now - 60.3) - 1  # what an honest collect stage closes now
        for p in range(PARTITIONS):
            run(r, Partial("rec", slot, p, PARTITIONS, [0, 1, 0, 0]).encode(), now)
        forged = Tick("rec", dict.fromkeys(range(PARTITIONS), now + 59.0), PARTITIONS)
        run(r, forged.encode(), now + 0.25)
    assert r.central.reasons(T0 + 20.5) == [
        "stream rec: progress claimed 119 s past its clock's edge (capped)"
    ]
    assert r.central.reasons(T0 + 90) == [], "named for SHOW_S seconds only"
    assert metrics.LATE_PARTIALS.labels("rec")._value.get() == late
    rec = {x["slot"]: round(sum(x["histogram"])) for x in releases(sent, "rec")}
    honest = range(math.floor(T0 - 59.3) - 1, math.floor(T0 + 20 - 60.3))
    assert all(rec.get(s) == PARTITIONS for s in honest), rec
    assert max(rec) <= math.floor(T0 + 20.25 - 60.3) - 1
    assert_on_the_clock(r, sent)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.floats(0.0, 30.0),  # wall-clock step
            st.integers(0, 3),  # partition
            st.one_of(st.none(), st.floats(-600.0, 60.0)),  # an event's time from the wall
            st.lists(st.booleans(), min_size=4, max_size=4),  # partitions read to their ends
        ),
        min_size=1,
        max_size=60,
    )
)
def test_event_progress_never_passes_the_settled_wall_nor_invents_time(steps):
    """The collect stage's event clocks on random batches: each partition's progress never
    passes the wall clock minus the skew, never moves back, and never passes the newest event
    time any partition delivered (an idle partition follows, it does not lead)."""
    from app.stream.collect.watermark import EventClocks
    from app.stream.slots import SlotClock

    clock = SlotClock(slot_s=1.0, grace_s=0.3)
    clocks, wall, last, newest = EventClocks(), T0, {}, -math.inf
    for dt, p, ts, ends in steps:
        wall += dt
        if ts is not None:
            clocks.saw(p, {"rec": wall + ts}, wall)
            newest = max(newest, wall + ts)
        for q in range(4):
            got = clocks.progress("rec", clock, q, dict(enumerate(ends)), wall)
            if got is None:
                assert q not in last, "progress, once known, stays known"
                continue
            assert got <= clock.settled(wall) and got <= newest
            assert got >= last.get(q, -math.inf), "never moves back"
            last[q] = got


# -- the collect stage and the agent together ----------------------------------------------


def users_of(partition, n):
    """``n`` users whose keys hash to ``partition``."""
    found = (f"u{i}" for i in range(10_000))
    return [u for u in found if partition_for(u.encode(), PARTITIONS) == partition][:n]


class Pipeline:
    """A collect stage (one worker, every partition) feeding a release agent, on one clock."""

    def __init__(self, settings_file):
        self.r, self.sent = make_agent(settings_file)
        self.c = Collector(self.r.settings.streams, PARTITIONS)
        self.offsets = dict.fromkeys(range(PARTITIONS), 0)
        for p in range(PARTITIONS):
            self.c.assign(p)
            self.c.mark_caught_up(p)

    def send(self, now, events):
        """Deliver ``(stream, user, ts, value)`` events at wall time ``now``."""
        by_partition: dict[int, list[Record]] = {}
        for sid, user, ts, value in events:
            p = partition_for(user.encode(), PARTITIONS)
            raw = msgpack.packb({"stream": sid, "user": user, "ts": ts, "value": value})
            by_partition.setdefault(p, []).append(Record(self.offsets[p], user.encode(), raw))
            self.offsets[p] += 1
        for p, batch in by_partition.items():
            assert self.c.add_batch(p, batch, now) == []

    def flush(self, now):
        """The fetches of every partition came at ``now`` (at their ends); flush what is due."""
        for p in range(PARTITIONS):
            self.c.observe_fetch(p, now, True, gap_s=3.0)
        partials, ticks = self.c.flush()
        for pa in partials:
            run(self.r, pa.encode(), now)
        progress: dict[str, dict[int, float]] = {}
        for t in ticks:
            progress.setdefault(t.stream, {})[t.partition] = t.progress
        for sid, by in progress.items():
            run(self.r, Tick(sid, by, PARTITIONS).encode(), now)

    def counted(self, sid):
        return {x["slot"]: round(sum(x["histogram"])) for x in releases(self.sent, sid)}


def test_a_producer_stamping_ahead_moves_no_clock_and_honest_values_count(settings_file):
    """The issue's drag: one producer stamps an event 59 s ahead every second in partition 0,
    beside honest users of both partitions on both streams. Every honest value is counted,
    no slot is released before its edge, and the collect stage's progress never passes it."""
    pipe = Pipeline(settings_file)
    mallory = users_of(0, 1)[0]
    honest = [u for p in range(PARTITIONS) for u in users_of(p, 4)[1:]]
    sent: dict[tuple[str, int], int] = {}
    for i in range(200):
        now = T0 + i * 0.5
        events = []
        if i % 2 == 0:
            events.append(("rec", mallory, now + 59.0, 3))  # counted too: a user's own value
            ahead = ("rec", math.floor(now + 59.0))
            sent[ahead] = sent.get(ahead, 0) + 1
            for u in honest:
                for sid in ("rec", "live"):
                    events.append((sid, u, now, 1))
                    sent[sid, math.floor(now)] = sent.get((sid, math.floor(now)), 0) + 1
        pipe.send(now, events)
        pipe.flush(now + 0.25)
        rec = pipe.r.settings.stream("rec")
        for p in range(PARTITIONS):
            progress = pipe.c.progress(rec, p)
            assert progress is None or progress <= rec.slots.settled(now + 0.25)
    for j in range(1, 80):  # let the event-time slots reach their edge
        pipe.flush(T0 + 100 + j)
    assert pipe.c.outcomes.get(("rec", "late"), 0) == 0, "no honest event found its slot closed"
    for sid in ("rec", "live"):
        got = pipe.counted(sid)
        closed = {s: n for (k, s), n in sent.items() if k == sid and s <= max(got)}
        assert len(closed) >= 100, sid
        missing = {s: (n, got.get(s)) for s, n in closed.items() if got.get(s) != n}
        assert missing == {}, f"{sid}: values not counted as sent: {missing}"
    assert pipe.r.central.reasons(T0 + 180) == [], "the collect stage never claimed ahead"
    assert_on_the_clock(pipe.r, pipe.sent)


def test_an_idle_partition_follows_the_slowest_active_one(settings_file):
    """A replay two minutes behind reaches both partitions, then partition 0 only: partition 1
    keeps its own progress for IDLE_S, then (read to its end, no event) follows partition 0,
    so the stream is not held still; with no event anywhere both keep the largest."""
    pipe = Pipeline(settings_file)
    rec = pipe.r.settings.stream("rec")
    forced = timeouts("rec")
    zero, one = users_of(0, 1)[0], users_of(1, 1)[0]
    for i in range(10):
        now = T0 + i
        pipe.send(now, [("rec", zero, now - 120.0, 0), ("rec", one, now - 120.0, 1)])
        pipe.flush(now + 0.5)
    stopped = T0 + 9 - 120.0  # partition 1's last event time
    for i in range(10, 40):
        now = T0 + i
        pipe.send(now, [("rec", zero, now - 120.0, 0)])
        pipe.flush(now + 0.5)
        idle = now + 0.5 - (T0 + 9) >= IDLE_S
        assert pipe.c.progress(rec, 1) == (now - 120.0 if idle else stopped), i
    got = pipe.counted("rec")
    assert max(got) == math.floor(T0 + 39 - 120.0 - 0.3) - 1, "closed as partition 0 moved"
    assert timeouts("rec") == forced, "the quiet partition's slots were never forced"
    sent = {math.floor(T0 + i - 120.0): 2 if i < 10 else 1 for i in range(40)}
    assert {s: n for s, n in got.items() if n} == {s: n for s, n in sent.items() if s <= max(got)}
    for j in range(30):  # nothing anywhere: both partitions idle, the stream's clock holds
        pipe.flush(T0 + 40 + j)
    assert pipe.c.progress(rec, 0) == pipe.c.progress(rec, 1) == T0 + 39 - 120.0
    assert max(pipe.counted("rec")) == max(got)


def test_an_event_stream_idle_then_active_releases_on_its_edge(settings_file):
    """Heard once, then silent for five minutes, then active with live-stamped events: nothing
    forced meanwhile, then every slot released once, in order, at or after its edge, with
    every value counted. The last slots wait for the stream's next events (event time)."""
    pipe = Pipeline(settings_file)
    users = [u for p in range(PARTITIONS) for u in users_of(p, 3)]
    forced = timeouts("rec")
    pipe.send(T0, [("rec", u, T0, 2) for u in users])
    for i in range(1, 300):
        pipe.flush(T0 + i)
    assert timeouts("rec") == forced
    silent = [x["slot"] for x in releases(pipe.sent, "rec")]
    assert max(silent) == math.floor(T0 - 0.3) - 1, "no slot past the first events' time"
    sent: dict[int, int] = {}
    for i in range(300, 420):
        now = T0 + i
        pipe.send(now, [("rec", u, now, 1) for u in users])
        sent[math.floor(now)] = len(users)
        pipe.flush(now + 0.5)
    for j in range(1, 80):
        pipe.flush(T0 + 420 + j)
    got = pipe.counted("rec")
    assert timeouts("rec") == forced
    assert list(got) == list(range(min(got), max(got) + 1)), "each slot once, in order"
    assert max(got) == math.floor(T0 + 419 - 0.3) - 1, "up to the last event time"
    assert got[math.floor(T0)] == len(users), "the first values, heard before the silence"
    wrong = {s: (n, got.get(s)) for s, n in sent.items() if s <= max(got) and got[s] != n}
    assert wrong == {}, "every active value counted"
    assert len(pipe.r.central._reached["rec"]) <= 2, "the driver's milestones stay pruned"
    held = {s for part in pipe.c.partitions.values() for (sid, s) in part.buckets if sid == "rec"}
    assert held == {max(got) + 1, max(got) + 2}, "the rest is held, not dropped"
    assert_on_the_clock(pipe.r, pipe.sent)


# -- readiness -----------------------------------------------------------------------------


def test_readiness_names_releases_ahead_of_and_behind_a_streams_clock(settings_file):
    r, _ = make_agent(settings_file)
    config = r.settings
    now = T0 + 0.5
    # A ledger left by the runaway: rec's next slot six hours ahead, live's one slot ahead.
    ahead = {"rec": math.floor(now) + 6 * 3_600, "live": math.floor(now) + 1}
    reasons = lagging(config, now, ahead, r.central.lag, ahead)
    assert reasons == [
        "stream rec: releases 21660 s ahead of the wall clock (slot 1800021599 released "
        "before it was due)",
        "stream live: releases 1 s ahead of the wall clock (slot 1800000000 released "
        "before it was due)",
    ]
    # Behind: rec's partitions passed slot T0 - 100 thirty seconds ago, and it is not closed
    # (a partition is alive but behind); the bound is release_timeout_s plus a slot.
    stuck = math.floor(T0 - 100.0)
    run(r, Tick("rec", {0: T0 - 95.0, 1: T0 - 95.0}, PARTITIONS).encode(), T0 - 30.0)
    behind = {"rec": stuck, "live": math.floor(now) - 1}
    reasons = lagging(config, now, behind, r.central.lag, {})
    assert reasons == ["stream rec: releases 30 s behind its event clock (4 slots due, bound 3 s)"]


def test_a_local_stream_released_inside_its_slot_is_not_ahead(make_settings, local_stream):
    """Local rounds end inside their slot, so its release precedes the slot's end by design."""
    settings = make_settings(local_stream())
    now = 1_000.0 + 4.0  # slot 100 (10 s slots) is running; it was released at its round's end
    assert lagging(settings, now, {"loc": 101}, None, {"loc": 101}) == []
