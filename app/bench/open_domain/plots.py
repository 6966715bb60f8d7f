"""The PNGs of ``bench open-domain``: per dataset, top-10 recall, top-100 recall and MAE on
the true keys against eps, one line per method, one row of panels per w."""

from __future__ import annotations

from pathlib import Path

from app.bench.open_domain.report import LABELS, Means
from app.bench.open_domain.run import METHODS

PANELS = ("recall10", "recall100", "mae_true")


def plot(m: Means, folder: Path) -> list[Path]:
    """Write ``open-domain-<dataset>.png`` per dataset into ``folder``; returns the paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for ds in sorted({k[0] for k in m}):
        ws = sorted({k[3] for k in m if k[0] == ds})
        fig, axes = plt.subplots(
            len(ws), len(PANELS), figsize=(4 * len(PANELS), 3 * len(ws)), squeeze=False
        )
        for i, w in enumerate(ws):
            for j, measure in enumerate(PANELS):
                ax = axes[i][j]
                for method in METHODS:
                    pts = sorted(
                        (k[2], v[measure])
                        for k, v in m.items()
                        if k[0] == ds and k[1] == method and k[3] == w
                    )
                    if pts:
                        ax.plot(*zip(*pts, strict=True), marker="o", label=method)
                ax.set_xscale("log", base=2)
                ax.set_xlabel("eps")
                ax.set_title(f"{LABELS[measure]}, w={w}", fontsize=9)
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"open-domain: {ds}")
        fig.tight_layout()
        path = folder / f"open-domain-{ds}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths
