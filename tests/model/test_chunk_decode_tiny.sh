#!/usr/bin/env bash
# Reference mode: chunked prefill (chunk sizes that split a ratio-2 group, a candidate block of 8,
# and the 128-token window) and token-by-token decode are bit-identical to one-shot prefill.
source "$(dirname "$0")/lib.sh"
T=300
M="$WORK/tiny"
"$CEDAR_BIN" make-model --preset tiny --seed 7 --out "$M" >/dev/null
make_ids 7 "$T" "$WORK/ids.txt"
"$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/ids.txt" --kernels ref --out "$WORK/one.npy"
for c in 1 2 3 5 7 8 9 64 127 128 129 250; do
  "$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/ids.txt" --kernels ref --chunk "$c" --out "$WORK/c.npy"
  check "chunk $c" "$PY" "$CMP" "$WORK/c.npy" "$WORK/one.npy" --label "tiny --chunk $c vs one-shot"
done
"$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/ids.txt" --kernels ref --decode --out "$WORK/d.npy"
check "decode" "$PY" "$CMP" "$WORK/d.npy" "$WORK/one.npy" --label "tiny --decode vs one-shot"
finish
