#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: run.sh TARGET CORPUS_DIR SECONDS. The corpus in
# the repo is only read; inputs the fuzzer finds go to a temporary directory, removed after. A
# crash, leak, sanitizer report or timeout makes libFuzzer exit non-zero and leaves the input in
# the working directory (crash-*, leak-*, timeout-*) for the log.
set -euo pipefail
target=$1 corpus=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir new
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
  -print_final_stats=1 new "$corpus" 2>&1 | tail -n 25
