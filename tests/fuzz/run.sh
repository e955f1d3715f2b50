#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: run.sh TARGET CORPUS_DIR SECONDS. The corpus in
# the repo is only read; inputs the fuzzer finds go to a temporary directory, removed after. A
# crash, leak, sanitizer report or timeout makes libFuzzer exit non-zero; its report and the
# failing input (crash-*, leak-*, timeout-*: printed as hex) go to the log.
set -uo pipefail
target=$1 corpus=$2 seconds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
mkdir new
"$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=262144 \
  -print_final_stats=1 new "$corpus" > log 2>&1
rc=$?
grep -E "^(Done [0-9]+ runs|stat::number_of_executed_units|stat::new_units_added)|ERROR|SUMMARY" log
if [ $rc -ne 0 ]; then
  tail -n 60 log
  for f in crash-* leak-* timeout-* oom-*; do
    [ -e "$f" ] && { echo "input $f:"; od -A d -t x1 "$f" | head -n 40; }
  done
fi
exit $rc
