"""The live worker's status page in a real headless Chromium, and ``GET /budget`` (issue 15).

Chromium comes from the distribution's packages (scripts/install-tools.sh installs it). The
test takes a screenshot of ``GET /`` and inspects its pixels: the page is not blank, the
released histograms are drawn in the fresh or repeat colours, and the budget bars in theirs.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import msgpack
import pytest
from PIL import Image

from app.stream.ops import status

from .conftest import LiveWorker, http_get, wait_for

BROWSERS = ("chromium", "chromium-browser", "chromium-headless-shell")
LEGEND_PIXELS = 2 * 10 * 10
"""The legend's two 10 x 10 squares in the fresh and repeat colours."""
MIN_BAR_PIXELS = 500
"""Bars of a released slot with ~100 users in one category cover thousands of pixels; a chart
of all-zero histograms draws none (only the legend)."""


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no Chromium: run scripts/install-tools.sh (Debian package chromium)")


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def _budget(target: str) -> dict:
    doc = json.loads(http_get(f"http://{target}/budget"))
    return doc if doc["streams"] and doc["streams"][0]["last_slot"] is not None else {}


def test_budget_endpoint(live_worker: LiveWorker) -> None:
    doc = wait_for(lambda: _budget(live_worker.target), 30, "a stream on /budget")
    (stream,) = doc["streams"]
    assert stream["stream"] == live_worker.stream
    assert [lv["level"] for lv in stream["levels"]] == ["strict", "standard", "relaxed"]
    for level in stream["levels"]:
        assert 0 <= level["window_spent"] <= level["eps"] + 1e-9
        assert level["window_end_utc"] == stream["last_slot_end_utc"]


def _send_events(live: LiveWorker) -> bool:
    """100 users in the current slot (most in category 1); True once the page shows a fresh
    release with a bar taller than the noise."""
    now = time.time()
    live.produce(
        [
            (
                f"u{u}".encode(),
                msgpack.packb({"stream": live.stream, "user": f"u{u}", "ts": now, "value": u % 4}),
            )
            for u in range(100)
        ]
    )
    page = http_get(f"http://{live.target}/")
    return f"fill='{status.FRESH_COLOR}'><title>slot" in page and page.count("<title>slot ") >= 30


def test_status_page_in_headless_chromium(live_worker: LiveWorker, tmp_path: Path) -> None:
    wait_for(lambda: _budget(live_worker.target), 30, "a stream on /budget")
    wait_for(lambda: _send_events(live_worker), 60, "a fresh release on the page", interval=1)
    shot = tmp_path / "status.png"
    proc = subprocess.run(  # noqa: S603 - the distribution's browser, a 127.0.0.1 URL
        [
            _browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=900,900",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            f"http://{live_worker.target}/",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shot.exists(), proc.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    assert img.size == (900, 900)
    colors = dict((rgb, n) for n, rgb in img.getcolors(maxcolors=1 << 20) or [])
    white = colors.get((255, 255, 255), 0)
    assert white < 0.97 * 900 * 900, "the page is blank"
    bars = colors.get(_rgb(status.FRESH_COLOR), 0) + colors.get(_rgb(status.REPEAT_COLOR), 0)
    assert bars - LEGEND_PIXELS >= MIN_BAR_PIXELS, f"no histogram bars drawn ({bars} pixels)"
    budget = colors.get(_rgb(status.BUDGET_COLOR), 0)
    assert colors.get(_rgb(status.BUDGET_OVER_COLOR), 0) == 0, "red on a healthy worker"
    empty_track = colors.get((0xEE, 0xEE, 0xEE), 0)
    assert budget + empty_track >= 3 * 150 * 10, "no budget bars drawn"
