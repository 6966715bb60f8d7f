"""Issue 23 item 13: a graceful stop exits 0, also when a rebalance cost the last commit."""

from __future__ import annotations

import pytest
from aiokafka.errors import CommitFailedError, IllegalStateError, RebalanceInProgressError

from app.stream.worker import exit_code


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (0, None, 0),
        (None, None, 0),
        (1, IllegalStateError("No partitions assigned"), 0),
        (
            1,
            IllegalStateError("Partition TopicPartition(topic='p', partition=0) is not assigned"),
            0,
        ),
        (
            1,
            CommitFailedError("Commit cannot be completed since the group has already rebalanced"),
            0,
        ),
        (1, RebalanceInProgressError(), 0),
        (1, RuntimeError("release agent failed"), 1),
        (1, None, 1),
        (2, ValueError("bad"), 2),
        ("boom", None, 1),
    ],
)
def test_a_commit_lost_to_a_rebalance_is_not_a_failure(
    code: object, reason: BaseException | None, expected: int
) -> None:
    assert exit_code(code, reason) == expected
