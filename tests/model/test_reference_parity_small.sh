#!/usr/bin/env bash
# Reference mode vs the numpy oracle on the small preset (the full 40-layer schedule of the
# release): 3 seeds at T=513 (Top-K 32 and the 8-block candidate pool bite), every row compared;
# for seed 1 also each boundary prompt length as its own run (CI time: the small preset costs
# ~20 ms/token in reference mode on 2 cores).
source "$(dirname "$0")/lib.sh"
LENGTHS="${CEDAR_SMALL_LENGTHS:-1 2 127 128 129 255 256 257 511 512 513}"
MAXLEN=513
for seed in 1 2 3; do
  M="$WORK/small$seed"
  "$CEDAR_BIN" make-model --preset small --seed "$seed" --out "$M" >/dev/null
  make_ids "$seed" "$MAXLEN" "$WORK/ids.txt"
  "$PY" "$REF" --model "$M" --ids-file "$WORK/ids.txt" --out "$WORK/ref.npy"
  lengths="$MAXLEN"
  if [ "$seed" = 1 ]; then lengths="$LENGTHS"; fi
  for n in $lengths; do
    head_ids "$WORK/ids.txt" "$n" "$WORK/ids_n.txt"
    "$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/ids_n.txt" --kernels ref --out "$WORK/c.npy"
    check "small seed $seed T=$n" "$PY" "$CMP" "$WORK/c.npy" "$WORK/ref.npy" --rows "$n" \
      --label "small seed=$seed T=$n" --tolerate-rare
  done
  rm -rf "$M"
done
finish
