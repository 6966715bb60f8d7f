#!/usr/bin/env bash
# Set up and run every check: lint, format, types, unit, property, statistical, integration (a real
# Kafka-protocol broker started by the suite), deployment validation. Safe to re-run.
#
#   bash scripts/test.sh            everything (README, "Tests": apt + passwordless sudo for
#                                   promtool and chromium, npm for helm; ~11 min on 2 cores)
#   bash scripts/test.sh --quick    lint, types, unit, conformance and doctests: no broker, no
#                                   tools, no sudo (~8 min on 2 busy cores)
#
# Other arguments go to pytest (e.g. `bash scripts/test.sh --quick tests/dp`).
#
# Every package comes at the version constraints.txt locks (scripts/lock.sh writes it), into the
# virtualenv DPSTREAM_VENV (default .venv; .ci/run gives a new empty one, as a fresh clone has).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = "--quick" ]; then
    quick=1
    shift
fi
venv=${DPSTREAM_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -c constraints.txt -e ".[dev,bench]"
if [ "$quick" = 0 ]; then PYTHON="$venv/bin/python" bash scripts/install-tools.sh; fi
"$venv/bin/ruff" check app tests
"$venv/bin/ruff" format --check app tests
"$venv/bin/mypy" --strict app  # also strict in pyproject.toml; stated here so it stays
if [ "$quick" = 1 ]; then
    # Neither the integration tests (a broker), nor the slow statistical ones, nor the
    # deployment validation (helm, promtool, compose, chromium).
    "$venv/bin/python" -m pytest -q -n 2 -m "not integration and not slow" \
        --ignore=tests/integration --ignore=tests/deploy --durations=10 "$@"
    exit
fi
# Four processes on two cores: the integration tests mostly wait on wall-clock slots, so about
# half the processes wait while the others compute, in the order tests/conftest.py gives the
# files (each file stays in one process, with its own embedded broker).
"$venv/bin/python" -m pytest -q -n 4 --dist loadfile --no-loadscope-reorder --durations=15 "$@"
