#!/usr/bin/env bash
# The image processor (issue "Native vision"): PNG, JPEG, WebP and GIF files in every layout the
# decoders handle give the reference processor's plan, letterboxed pixels and bf16 patches byte
# for byte (PIL decodes and resamples there), the spec's worked token counts hold, and truncated
# or corrupt files are clean errors (tests/model/compare_images.py).
source "$(dirname "$0")/lib.sh"
check "cedar image == reference processor" \
  "$PY" "$CEDAR_SOURCE_DIR/tests/model/compare_images.py" "$CEDAR_BIN" "$CEDAR_SOURCE_DIR" "$WORK"
finish
