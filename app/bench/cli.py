"""``dpstream bench`` (experiment grids, one verb per paper, cost, results) and
``dpstream replay``.

Like every verb here it imports nothing heavy until it runs. The capacity benchmarks of the
service are ``dpstream capacity`` (:mod:`app.tools.capacity.cli`).
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import Any

CENTRAL = "uniform,sample,bd,ba,pbd,pba"


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(x) for x in text.split(","))


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def _names(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def register(sub: Any) -> None:
    bench = sub.add_parser(
        "bench",
        help="run benchmark grids (default) or cost benchmarks",
        description="Replay a dataset through mechanisms over eps x w x seeds; write "
        "results.csv and results.md.",
    )
    from app.bench.engine.presets import names as preset_names

    bench.add_argument(
        "--preset",
        choices=preset_names(),
        help="run a paper figure's grid: pwsm-eps, pwsm-w, pwsm-ratio-eps, pwsm-ratio-w, "
        "ldp-ids-eps, ldp-ids-w, ldp-ids-cfpu "
        "(other grid options are ignored, except --dataset, --jobs and --out)",
    )
    bench.add_argument("--quick", action="store_true", help="with --preset: the reduced grid")
    bench.add_argument(
        "--dataset", help="dataset name (default: sin, or the preset's: tdrive / lns / sin)"
    )
    bench.add_argument("--mechanisms", type=_names, default=_names(CENTRAL))
    bench.add_argument("--eps", type=_floats, default=(0.6,), help="comma-separated eps grid")
    bench.add_argument("--w", type=_ints, default=(120,), help="comma-separated w grid")
    bench.add_argument("--seeds", type=int, default=5, help="number of seeds (0..n-1)")
    bench.add_argument(
        "--setting", default="types", choices=("types", "two-eps", "two-w", "single")
    )
    bench.add_argument("--ratio", type=float, default=0.5, help="two-group ratio o")
    bench.add_argument("--users", type=int, help="override the dataset's number of users")
    bench.add_argument("--slots", type=int, help="override the dataset's number of slots")
    bench.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    bench.add_argument(
        "--out", type=Path, help="output folder (default: out/bench, out/bench/<preset>-<dataset>)"
    )
    kinds = bench.add_subparsers(dest="bench_kind", metavar="KIND")
    bench.set_defaults(func=_grid)

    from app.bench.verbs import register as register_papers

    register_papers(kinds)  # dpstream bench pwsm | ldp-ids | pldp | optstream | wn | open-domain

    cost = kinds.add_parser("cost", help="step time against d, m and N; full T-Drive replay")
    cost.add_argument("--out", type=Path, default=Path("out/cost"))
    cost.add_argument("--quick", action="store_true", help="a reduced sweep, no replay")
    cost.set_defaults(func=_cost)

    results = kinds.add_parser(
        "results", help="run the paper presets and regenerate RESULTS.md (claims vs measured)"
    )
    results.add_argument(
        "--quick",
        action="store_true",
        help="quick presets (minutes); without the public data sets, on generated data only",
    )
    results.add_argument(
        "--reuse",
        action="store_true",
        help="reuse the stored runs (the run store, docs/results); run only what is missing "
        "(that needs the public data sets; a complete store needs none)",
    )
    results.add_argument("--jobs", type=int, help="worker processes (default: all cores)")
    results.add_argument(
        "--out",
        type=Path,
        help="the run store (default docs/results; with --quick, out/results)",
    )
    results.add_argument(
        "--cost-dir",
        type=Path,
        help="cost benchmark folder, run if missing (default <--out>/cost)",
    )
    results.add_argument("--write", type=Path, default=Path("RESULTS.md"), help="report path")
    results.add_argument(
        "--figures",
        type=Path,
        default=Path("docs/results"),
        help="where the report's PNGs are copied",
    )
    results.set_defaults(func=_results)

    replay = kinds.add_parser(
        "replay",
        help="replay a short synthetic series through a mechanism and print its releases",
    )
    replay.add_argument(
        "--mechanism", default="pba", help="a central or local mechanism (default pba)"
    )
    replay.add_argument("--series", dest="stream", default="sin", choices=("tlns", "sin", "log"))
    replay.add_argument("--slots", type=int, default=20)
    replay.add_argument("--users", type=int, default=10_000)
    replay.add_argument("--seed", type=int, default=0)
    replay.set_defaults(func=_replay)
    for parser in (bench, *kinds.choices.values()):
        parser.set_defaults(func=_refusing_missing_data(parser.get_default("func")))


def _refusing_missing_data(func: Any) -> Any:
    """``func``, with a missing public data set said in one line (exit 2), not a traceback."""

    @functools.wraps(func)
    def verb(args: argparse.Namespace) -> int:
        from app.bench.engine.datasets import DatasetMissing

        try:
            return int(func(args))
        except DatasetMissing as exc:
            print(f"dpstream bench: {exc}", file=sys.stderr)
            return 2

    return verb


def _preset(args: argparse.Namespace) -> int:
    from app.bench.engine.datasets import fallback_note, missing, require
    from app.bench.engine.presets import resolve
    from app.bench.engine.runner import run_preset

    try:
        preset = resolve(args.preset, dataset=args.dataset, quick=args.quick)
        if args.dataset is None and missing(preset.dataset):
            generated = next(ds for ds in preset.datasets if not missing(ds))
            print(fallback_note("bench", [preset.dataset], f"on {generated}"), file=sys.stderr)
            preset = resolve(args.preset, dataset=generated, quick=args.quick)
        require(preset.dataset)
    except ValueError as exc:
        print(f"dpstream bench: error: {exc}", file=sys.stderr)
        return 2
    suffix = "-quick" if args.quick else ""
    out = args.out or Path("out/bench") / f"{preset.name}-{preset.dataset}{suffix}"
    print(preset.describe(), file=sys.stderr)
    _, paths = run_preset(preset, out, jobs=args.jobs)
    print(paths[1].read_text())
    print("wrote " + ", ".join(str(p) for p in paths), file=sys.stderr)
    return 0


RESULTS_DATA = ("tdrive", "rte2013", "msnbc", "diginetica")
"""The public data sets the runs behind RESULTS.md read."""


def _results(args: argparse.Namespace) -> int:
    from functools import partial

    from app.bench.engine.datasets import fallback_note, missing, missing_line
    from app.bench.engine.runs import RUNS
    from app.bench.report.regenerate import regenerate
    from app.bench.report.stored import ensure, runnable

    if (no_plots := plotting_missing("bench results")) is not None:
        print(no_plots, file=sys.stderr)
        return 2
    args.out = args.out or Path("out/results" if args.quick else "docs/results")
    args.cost_dir = args.cost_dir or args.out / "cost"
    runs, stored = RUNS, ensure
    complete = args.reuse and stored_complete(args.out, args.figures, args.cost_dir)
    absent = [] if complete else [n for n in RESULTS_DATA if missing(n)]
    if absent:
        if args.reuse or not args.quick:
            print(
                f"dpstream bench results: {missing_line(absent)}; RESULTS.md compares the "
                "papers' claims on them (--quick without --reuse runs on generated data)",
                file=sys.stderr,
            )
            return 2
        print(fallback_note("bench results", absent, "the runs on generated data"), file=sys.stderr)
        runs = tuple((name, ds) for name, ds in RUNS if not missing(ds))
        stored = partial(ensure, specs=runnable())
    path = regenerate(
        args.write,
        args.out,
        args.figures,
        args.cost_dir,
        quick=args.quick,
        reuse=args.reuse,
        jobs=args.jobs,
        runs=runs,
        stored=stored,
        absent=absent,
    )
    print(f"wrote {path}", file=sys.stderr)
    return 0


def stored_complete(out: Path, figures: Path, cost_dir: Path) -> bool:
    """Whether the run store holds every run RESULTS.md reads (then ``--reuse`` runs nothing
    and needs no public data set)."""
    from app.bench.engine.runs import ROWS, RUNS
    from app.bench.engine.store import find
    from app.bench.report.stored import STORED

    return (
        all(find(out / f"{name}-{ds}" / ROWS) for name, ds in RUNS)
        and all(find(figures / s.folder / s.output) for s in STORED)
        and find(cost_dir / "cost_slopes.csv") is not None
    )


def plotting_missing(verb: str) -> str | None:
    """The one-line error to print if matplotlib (the ``bench`` extra) is not installed."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        return None
    return (
        f"dpstream {verb}: matplotlib is not installed, and the plots need it: install the "
        "bench extra, `pip install -e '.[bench]'` (or `pip install matplotlib`)"
    )


def _grid(args: argparse.Namespace) -> int:
    from app.bench.engine.grid import Grid, run_grid, write_results

    if (missing := plotting_missing("bench")) is not None:
        print(missing, file=sys.stderr)
        return 2
    if args.preset:
        return _preset(args)
    args.dataset = args.dataset or "sin"
    args.out = args.out or Path("out/bench")

    options = {k: v for k, v in (("N", args.users), ("T", args.slots)) if v is not None}
    grid = Grid(
        dataset=args.dataset,
        mechanisms=args.mechanisms,
        eps_values=args.eps,
        w_values=args.w,
        seeds=tuple(range(args.seeds)),
        setting=args.setting,
        ratio=args.ratio,
        dataset_options=options,
    )
    rows = run_grid(grid, jobs=args.jobs)
    csv_path, md_path = write_results(rows, args.out, grid)
    print(md_path.read_text())
    print(f"wrote {csv_path} and {md_path}", file=sys.stderr)
    return 0


def _cost(args: argparse.Namespace) -> int:
    from app.bench.engine.cost import step_times, tdrive_replay
    from app.bench.engine.datasets import fallback_note, missing

    if (no_plots := plotting_missing("bench cost")) is not None:
        print(no_plots, file=sys.stderr)
        return 2

    if args.quick:
        step_times(args.out, d_values=(10, 100, 1000), m_values=(1, 10), n_values=(1000, 10_000))
    elif missing("tdrive"):
        print(fallback_note("bench cost", ["tdrive"], "the step times only"), file=sys.stderr)
        step_times(args.out)
    else:
        step_times(args.out)
        tdrive_replay(args.out)
    print(f"wrote cost benchmarks to {args.out}", file=sys.stderr)
    return 0


REPLAY_GROUPS = ((12, 0.6), (4, 1.0))
"""The replay's two requirement groups ``(w, eps)``; single-level mechanisms take the strictest
``(max w, min eps)``, as the static baselines of the PWSM paper do (§5.2)."""


def _replay(args: argparse.Namespace) -> int:
    """``dpstream replay``: central and local mechanisms; one line for anything else."""
    from app.dp.errors import DPError
    from app.dp.registry import get, names

    try:
        cls = get(args.mechanism)
    except DPError:
        print(
            f"dpstream replay: unknown mechanism {args.mechanism!r}; registered: "
            f"{', '.join(names())}",
            file=sys.stderr,
        )
        return 2
    if cls.kind not in ("central", "local"):
        replayable = ", ".join(names("central") + names("local"))
        print(
            f"dpstream replay: {args.mechanism!r} is a {cls.kind} mechanism, which this "
            f"synthetic replay does not feed; it replays: {replayable}",
            file=sys.stderr,
        )
        return 2
    if args.slots < 1 or args.users < 2:
        print("dpstream replay: --slots must be >= 1 and --users >= 2", file=sys.stderr)
        return 2
    try:
        if cls.kind == "central":
            released, true = _replay_central(args)
        else:
            released, true = _replay_local(args, cls)
    except (DPError, ValueError) as exc:
        print(f"dpstream replay: {exc}", file=sys.stderr)
        return 2
    from app.bench.engine import measures

    print(
        f"error over {args.slots} slots (released vs true counts): "
        f"MAE {measures.mae(released, true):.4g}, MRE {measures.mre(released, true):.4g} "
        "(relative error floor 1)"
    )
    return 0


def _takes_groups(cls: Any) -> bool:
    import inspect

    return "groups" in inspect.signature(cls).parameters


def _replay_central(args: argparse.Namespace) -> tuple[Any, Any]:
    import numpy as np

    from app.bench.engine.synthetic import group_counts
    from app.dp.interfaces import as_slotted
    from app.dp.registry import create
    from app.dp.types import Group

    groups = [Group(w, eps) for w, eps in REPLAY_GROUPS]
    rng = np.random.default_rng(args.seed)
    sizes = [args.users // 2] * 2  # users per group: the public population OBS takes
    counts = group_counts(args.stream, args.slots, sizes, rng)
    mech = as_slotted(create(args.mechanism, d=2, groups=groups))
    print(f"{mech.name}: {mech.describe()}")
    print(f"stream {args.stream}, {args.users} users, groups {groups}")
    released = []
    for c in counts:
        r = mech.step(c, rng, sizes)
        released.append(r.histogram)
        hist = " ".join(f"{x:9.1f}" for x in r.histogram)
        true = " ".join(f"{x:6d}" for x in c.sum(axis=0))
        spent = " ".join(f"{x:.4f}" for x in r.spent)
        print(f"slot {r.slot:3d} {r.status:9s} released [{hist}] true [{true}] spent [{spent}]")
    return np.array(released), counts.sum(axis=1)


def _replay_local(args: argparse.Namespace, cls: Any) -> tuple[Any, Any]:
    """Devices and service offline (:func:`app.bench.engine.simulate.run_local`);
    frequencies x N."""
    import numpy as np

    from app.bench.engine import replay
    from app.bench.engine.simulate import run_local
    from app.bench.engine.synthetic import values
    from app.dp.types import Group

    rng = np.random.default_rng(args.seed)
    n = args.users
    data = values(args.stream, args.slots, n, rng)
    if _takes_groups(cls):
        groups = [Group(w, eps) for w, eps in REPLAY_GROUPS]
        sizes = [n // 2, n - n // 2]
        params: dict[str, Any] = {"groups": groups, "users": sizes}
        what = f"groups {groups}, users {params['users']}"
    else:
        w = max(w for w, _ in REPLAY_GROUPS)
        eps = min(e for _, e in REPLAY_GROUPS)
        groups, sizes = [Group(w, eps)], [n]
        params = {"eps": eps, "w": w, "users": n}
        what = f"w={w}, eps={eps:g}"
    run = run_local(data, 2, args.mechanism, params, rng, keep="users")
    print(f"{args.mechanism} (local, simulated devices): stream {args.stream}, {n} users, {what}")
    print(
        "window max = per group, the most one user spent in the w slots ending at the slot "
        "(what eps bounds; a slot's rounds may ask disjoint cohorts)"
    )
    true = np.stack([(data == 0).sum(axis=1), (data == 1).sum(axis=1)], axis=1)
    released = run.histograms() * n  # frequencies -> counts
    lines, peaks = replay.local_lines(run, groups, sizes, released, true)
    print("\n".join(lines))
    print(replay.peak_line(peaks, [f"group {g}" for g in range(len(groups))]))
    return released, true
