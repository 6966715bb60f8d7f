#!/usr/bin/env bash
# Set up and run every check: lint, types, unit, property, statistical, integration (a real
# Kafka-protocol broker started by the suite), deployment validation. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[dev,bench]"
if [ -x scripts/install-tools.sh ]; then bash scripts/install-tools.sh; fi
.venv/bin/ruff check app tests
.venv/bin/mypy app
# Two processes: the integration tests mostly wait on wall-clock slots (each file stays in one
# process, with its own embedded broker).
.venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=15 "$@"
