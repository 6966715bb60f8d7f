"""A fault hook for the crash tests: kill -9 right after a period's ledger write.

``tests/integration/test_period_crash.py`` must kill the worker at one exact moment of the slot
release protocol (:mod:`app.stream.release.protocol`): after step 3 (the entry holding a whole
period's releases is persisted) and before step 4 (any of them is produced). No signal from
outside can hit that moment reliably, so the worker kills itself there when the test asks:

``DPSTREAM_TEST_KILL_AFTER_PERIOD_RECORD=<path>``: at the first period release while ``<path>``
does not exist, create it and send SIGKILL to this process. The file makes it happen once per
test, across restarts. Nothing else reads the variable; never set it in a deployment.

Every failpoint is inert unless a second, explicit guard is also set:
``DPSTREAM_TEST_FAILPOINTS=1`` (:data:`FAILPOINTS`; issue 21), so a stray variable in a
deployment's environment cannot kill a worker (``docs/security.md`` lists both).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

KILL_AFTER_PERIOD_RECORD = "DPSTREAM_TEST_KILL_AFTER_PERIOD_RECORD"
FAILPOINTS = "DPSTREAM_TEST_FAILPOINTS"
"""The guard: failpoints act only when this variable is exactly ``1``."""


def after_period_record() -> None:
    """Kill -9 this process if the test hook asks for it and the guard is set (see the module
    docstring)."""
    if os.environ.get(FAILPOINTS) != "1":
        return
    marker = os.environ.get(KILL_AFTER_PERIOD_RECORD)
    if marker and not Path(marker).exists():
        Path(marker).touch()
        os.kill(os.getpid(), signal.SIGKILL)
