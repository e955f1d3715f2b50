#!/usr/bin/env bash
# The synthetic training conversations (tools/train/synth.py): each renders with `cedar render`,
# each tool call's rendered DSML parses back with `cedar parse` to the call it came from, and both
# splits (train, held out) are present.
source "$(dirname "$0")/lib.sh"
check "synth --check" "$PY" "$CEDAR_SOURCE_DIR/tools/train/synth.py" --check --count 200 --seed 2
finish
