"""The stored runs of the papers outside the preset grid: PLDP-IDS, (w,n)-DP and OptStream.

Each :class:`Stored` names one run of a paper verb (``dpstream bench pldp | wn | optstream``),
its options and the file it writes. The runs live where their figures are linked from (the
report's figures folder, ``docs/results`` by default): their CSVs are small (gzipped), so the
folder holds both the data and the PNGs, and ``--reuse`` reads them back. :func:`ensure` runs
the missing ones (all of them without ``reuse``) and records each run's command, commit,
machine, wall time and load in ``<root>/runs.json`` (:mod:`app.bench.engine.store`), the record
the report quotes.

Two outputs no verb writes are produced here from the verbs' own functions: Table 1 of the
(w,n) paper (:func:`table1`, which ``dpstream bench wn --figure table1`` only prints) and the
Thm 11 table of OptStream (:func:`thm11`, printed by ``--figure thm11``); so is the all-zeros
reference of the OptStream data (:func:`zeros_reference`).

>>> [s.key for s in STORED][:3]
['pldp', 'wn', 'wn-table1']
>>> find(STORED, "optstream-fig3").command(Path("docs/results"))
'dpstream bench optstream --data rte2013 --trials 6 --out docs/results/optstream-fig3'
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from app.bench.engine.store import Produced, Stored, gzip_file, record, records, verb_args
from app.bench.engine.store import find as latest

__all__ = ["STORED", "ensure", "find", "runnable", "table1", "thm11", "zeros_reference"]


STORED: tuple[Stored, ...] = (
    Stored(
        "pldp",
        "pldp",
        ".",
        "pldp-results.csv",
        ("--seeds", "2", "--slots", "1000", "--real-slots", "1440"),
        gzip_output=False,
    ),
    Stored("wn", "wn", "wn", "trajectory.csv", ("--seeds", "3", "--l", "20")),
    Stored(
        "wn-table1",
        "wn",
        "wn",
        "table1.csv",
        producer="table1",
        reads=("tdrive", "msnbc", "diginetica"),
    ),
    Stored(
        "optstream-fig3",
        "optstream",
        "optstream-fig3",
        "optstream.csv",
        ("--data", "rte2013", "--trials", "6"),
    ),
    Stored(
        "optstream-fig3-tdrive",
        "optstream",
        "optstream-fig3-tdrive",
        "optstream.csv",
        ("--data", "tdrive", "--trials", "5"),
    ),
    Stored(
        "optstream-fig3-synthetic",
        "optstream",
        "optstream-fig3-synthetic",
        "optstream.csv",
        ("--data", "synthetic", "--trials", "2"),
    ),
    Stored(
        "optstream-fig8",
        "optstream",
        "optstream-fig8",
        "optstream.csv",
        ("--figure", "8", "--data", "rte2013", "--trials", "2"),
    ),
    Stored(
        "optstream-fig10",
        "optstream",
        "optstream-fig10",
        "optstream.csv",
        ("--figure", "10", "--data", "rte2013", "--trials", "3"),
    ),
    Stored(
        "optstream-fig10-k10",
        "optstream",
        "optstream-fig10-k10",
        "optstream.csv",
        (
            "--figure",
            "10",
            "--data",
            "rte2013",
            "--alpha",
            "100",
            "--k",
            "10",
            "--trials",
            "3",
            "--no-extras",
        ),
    ),
    Stored(
        "optstream-fig4",
        "optstream",
        "optstream-fig4",
        "optstream.csv",
        ("--figure", "4", "--data", "rte2013", "--trials", "2"),
    ),
    Stored(
        "optstream-fig6",
        "optstream",
        "optstream-fig6",
        "forecast.csv",
        ("--figure", "6", "--trials", "2"),
        reads=("rte2013",),
    ),
    Stored("optstream-thm11", "optstream", "optstream-thm11", "thm11.csv", producer="thm11"),
    Stored(
        "optstream-visuals",
        "optstream",
        "optstream-visuals",
        "fig2_streams.png",
        ("--figure", "visuals"),
        gzip_output=False,
        reads=("rte2013",),
    ),
    Stored(
        "optstream-reference",
        "optstream",
        "optstream-fig3",
        "reference.json",
        producer="zeros_reference",
        gzip_output=False,
        reads=("rte2013", "tdrive"),
    ),
)
"""Every stored run RESULTS.md reads, with the presets its sections state."""


def find(specs: Iterable[Stored], key: str) -> Stored:
    """The spec named ``key``."""
    return next(s for s in specs if s.key == key)


def _write_rows(rows: Sequence[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def table1(folder: Path) -> None:
    """(w,n) Table 1 on the stand-ins (:mod:`app.bench.wn.spatial_range`): one row per
    (dataset, w, n), the cumulative % of users with range <= n (``n = "other"``: users whose
    pages span two components), with the graph's size and the users counted."""
    from app.bench.wn import spatial_range as tr

    rows: list[dict[str, Any]] = []
    for name, loader in tr.LOADERS.items():
        graph, users = loader()
        table = tr.range_table(tr.Ranges(graph), users)
        for w, shares in table.items():
            for n, share in zip([*tr.NS, "other"], shares.tolist(), strict=True):
                rows.append(
                    {
                        "dataset": name,
                        "users": len(users),
                        "nodes": graph.nodes,
                        "edges": graph.edge_count,
                        "w": w,
                        "n": n,
                        "share": round(share, 4),
                    }
                )
    _write_rows(rows, folder / "table1.csv")


THM11_L = (0.1, 1.0, 10.0)
THM11_K = (2, 3, 4, 6, 8, 12, 16, 24)


def thm11(folder: Path, trials: int = 2) -> None:
    """OptStream H9 (Thm 11): mean L1 of ES without post-processing per (L, k), and of
    Laplace (``k = 48``, every slot), on the sines of :func:`app.bench.optstream.runs.theorem11`."""
    import numpy as np

    from app.bench.optstream import runs as o

    rows: list[dict[str, Any]] = []
    t = np.arange(o.W * 20)
    for lip in THM11_L:
        period = 4 * o.W
        x = 10_000 + lip * period / (2 * np.pi) * np.sin(2 * np.pi * t / period)
        for k in (*THM11_K, o.W):
            p = {**o.OPT, "sampling": "es", "postprocess": False, "k": k, "es_split": "halves"}
            err = np.mean([o.mean_l1("optstream", p, x, 1.0, 1.0, s) for s in range(trials)])
            rows.append({"L": lip, "k": k, "eps": 1.0, "w": o.W, "trials": trials, "error": err})
    _write_rows(rows, folder / "thm11.csv")


def zeros_reference(folder: Path) -> None:
    """The mean of each OptStream dataset's series: the L1 error of releasing all zeros."""
    from app.bench.optstream.runs import load_rte, synthetic_load
    from app.bench.optstream.tdrive import tdrive_regions

    means = {f"rte2013 {m}": float(load_rte(m)[1].mean()) for m in ("2013-01", "2013-02")}
    means["synthetic 28d"] = float(synthetic_load(28, seed=2016)[1].mean())
    means["tdrive 2008-02"] = float(tdrive_regions()[1].mean())
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "reference.json").write_text(json.dumps(means, indent=1))


PRODUCERS: dict[str, Callable[[Path], None]] = {
    "table1": table1,
    "thm11": thm11,
    "zeros_reference": zeros_reference,
}


def runnable(specs: Sequence[Stored] = STORED) -> list[Stored]:
    """The specs whose named data sets are all there (the others need a public set that is
    missing; a verb's default data falls back to generated sets, :func:`_run_verb`)."""
    from app.bench.engine.datasets import missing

    return [s for s in specs if not any(missing(n) for n in s.public_data())]


def _run_verb(spec: Stored, out: Path, quick: bool) -> None:
    """The verb in this process, as ``dpstream bench <paper> <args> --out <out>`` runs it."""
    from app.bench.papers import fall_back, module_parser

    module, parser = module_parser(spec.paper)
    options = parser.parse_args([*verb_args(spec, quick), "--out", str(out)])
    fall_back(spec.paper, module, parser, options)  # a missing default set: its stand-in
    module.run_cli(options)


def _produce(spec: Stored, root: Path, quick: bool) -> None:
    folder = root / spec.folder
    if spec.producer:
        PRODUCERS[spec.producer](folder)
    else:
        _run_verb(spec, folder, quick)
    plain = folder / spec.output
    if spec.gzip_output and plain.exists():
        gzip_file(plain)


def ensure(
    root: str | Path,
    *,
    reuse: bool = False,
    quick: bool = False,
    specs: Sequence[Stored] = STORED,
    produce: Callable[[Stored, Path, bool], None] = _produce,
) -> dict[str, Produced]:
    """Run every stored run (with ``reuse``, only those whose output is missing), record what
    ran in ``<root>/runs.json``, and return ``key -> Produced``."""
    base = Path(root)
    log = records(base)
    done: dict[str, Produced] = {}
    for spec in specs:
        folder = base / spec.folder
        if not (reuse and latest(folder / spec.output)):
            began = time.perf_counter()
            produce(spec, base, quick)
            wall = round(time.perf_counter() - began, 1)
            log[spec.key] = record(base, spec.key, command=spec.command(base, quick), wall_s=wall)
        entry = log.get(spec.key, {})
        done[spec.key] = Produced(
            spec,
            latest(folder / spec.output),
            str(entry.get("command", spec.command(base))),
            float(entry.get("wall_s", float("nan"))),
            entry.get("load"),
        )
    return done
