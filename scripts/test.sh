#!/usr/bin/env bash
# The README's test command: install, build, run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j 2 --timeout 1800
