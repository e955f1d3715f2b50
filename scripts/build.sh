#!/usr/bin/env bash
# Configures and builds cedar (Release, Ninja) into build/; with --sanitize, the clang ASan +
# UBSan + libFuzzer build into build-asan/ (tests and fuzz targets; see scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--sanitize" ]; then
  CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCEDAR_FUZZ=ON >/dev/null
  cmake --build build-asan -j "$(nproc)"
  exit 0
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
