"""Issue 23 item 12: one UTC format in every output, written by one function (``app.utc``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path

import pytest

from app.client.releases import SlotRelease
from app.dp.types import WindowSpend
from app.stream.config import DEFAULT_STREAMS, load_streams
from app.stream.ops.budget_view import budget_json
from app.tools.releases import compact_line, format_line
from app.utc import utc, utc_time

APP = Path(__file__).resolve().parents[2] / "app"
ISO = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


@pytest.mark.parametrize(
    ("ts", "text"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1795436252.999, "2026-11-23T12:17:32Z"),  # fractions are dropped, never rounded up
        (951782400, "2000-02-29T00:00:00Z"),
    ],
)
def test_utc_is_iso_8601_to_the_second(ts: float, text: str) -> None:
    assert utc(ts) == text
    assert utc_time(ts) == text[11:]
    assert datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() == int(ts)


def test_every_output_uses_it() -> None:
    release = SlotRelease("web", 29, 1740.0, 1800.0, (3.0, 1.0), True, "pba", {}, 1, 1)
    assert ISO.match(release.start_utc) and ISO.match(release.to_json()["end_utc"])
    assert "1970-01-01T00:29:00Z..00:30:00Z" in format_line(release)
    assert " 00:29:00Z fresh " in compact_line(release)
    stream = load_streams(DEFAULT_STREAMS)[0]
    view = budget_json(stream, [WindowSpend(3, 1.0, Fraction(0))] * len(stream.levels), 10)
    times = [v for k, v in view.items() if k.endswith("_utc")]
    times += [v for row in view["levels"] for k, v in row.items() if k.endswith("_utc")]
    assert times and all(ISO.match(t) for t in times)


def test_no_other_module_formats_a_time() -> None:
    """Outside ``app/utc.py`` nothing in the service, the SDK, the tools, the verifier or the
    auditor turns a timestamp into text (the bench's dataset metadata is not output)."""
    pattern = re.compile(r"strftime|(?<!from)isoformat\(|gmtime|localtime|ctime\(")
    offenders = []
    for package in ("stream", "client", "tools", "verify", "audit"):
        for path in sorted((APP / package).rglob("*.py")):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    offenders.append(f"{path.relative_to(APP)}:{n}: {line.strip()}")
    assert offenders == []
