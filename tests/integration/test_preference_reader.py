"""The personalized local streams' preference reader on the real broker.

Tansu answers ListOffsets(latest) with the last record batch's base offset + 1, not the last
offset + 1 (``docs/ecosystem.md``): a first version of
:class:`app.stream.release.local_levels.PreferenceReader` that kept only the records below that
"end"
read 149 of 800 levels. It now reads to the high watermarks of the fetch responses.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgpack
import pytest

from app.stream.config import load_settings
from app.stream.release.local_levels import PreferenceReader
from app.stream.topics import load_topics

pytestmark = pytest.mark.integration

RECORDS = 600


def _batched(kafka: Any, topic: str) -> None:
    """``RECORDS`` preferences in a few large batches (linger), as a busy producer sends them."""
    items = [(f"{i}".encode(), msgpack.packb({"level": "open"})) for i in range(RECORDS)]
    kafka.produce(topic, items)


@pytest.fixture()
def settings(broker: Any, tmp_path: Any) -> Any:
    env = {
        "DPSTREAM_BROKER": broker.bootstrap,
        "DPSTREAM_NOISE_KEY": "ab" * 16,
        "DPSTREAM_DEPLOYMENT": "test",
    }
    return load_settings(env=env)


def test_the_preference_reader_reads_every_record_then_only_new_ones(kafka, settings) -> None:
    topics = load_topics("side2.")
    kafka.create_topics("side2.")
    _batched(kafka, topics.preferences)
    reader = PreferenceReader(settings, topics.preferences)

    async def main() -> tuple[int, int, int]:
        try:
            first = await reader.read({})
            offsets = {}
            for rec in first:
                offsets[rec.partition] = rec.offset + 1
            none = await reader.read(offsets)
            kafka.produce(topics.preferences, [(b"7", msgpack.packb({"level": "x"}))])
            await asyncio.sleep(1.0)  # the background fetches bring it
            new = await reader.read(offsets)
            return len(first), len(none), len(new)
        finally:
            await reader.stop()

    assert asyncio.run(main()) == (RECORDS, 0, 1)
