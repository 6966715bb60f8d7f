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
.venv/bin/python -m pytest -q --durations=15 "$@"
