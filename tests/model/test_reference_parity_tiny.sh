#!/usr/bin/env bash
# Reference mode vs the numpy oracle on the tiny preset: full-vocabulary logits at every position
# must be bit-identical, for 3 seeds and the boundary prompt lengths (window 128, ratio-2 groups,
# candidate blocks of 8 rows), plus a prompt long enough that Top-K (16) and the candidate pool
# (4 blocks) bite at every compressed layer.
source "$(dirname "$0")/lib.sh"
LENGTHS="1 2 127 128 129 255 256 257 511 512 513 700"
MAXLEN=700
for seed in 1 2 3; do
  M="$WORK/tiny$seed"
  "$CEDAR_BIN" make-model --preset tiny --seed "$seed" --out "$M" >/dev/null
  make_ids "$seed" "$MAXLEN" "$WORK/ids.txt"
  "$PY" "$REF" --model "$M" --ids-file "$WORK/ids.txt" --out "$WORK/ref.npy"
  for n in $LENGTHS; do
    head_ids "$WORK/ids.txt" "$n" "$WORK/ids_n.txt"
    "$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/ids_n.txt" --kernels ref --out "$WORK/c.npy"
    check "tiny seed $seed T=$n" "$PY" "$CMP" "$WORK/c.npy" "$WORK/ref.npy" --rows "$n" \
      --label "tiny seed=$seed T=$n" --tolerate-rare
  done
  # the reference itself at a short length equals its own prefix of the long run (causality)
  head_ids "$WORK/ids.txt" 129 "$WORK/ids_n.txt"
  "$PY" "$REF" --model "$M" --ids-file "$WORK/ids_n.txt" --out "$WORK/ref129.npy"
  check "ref causality seed $seed" "$PY" "$CMP" "$WORK/ref129.npy" "$WORK/ref.npy" --rows 129 \
    --label "numpy T=129 vs prefix of T=$MAXLEN seed=$seed"
  rm -rf "$M"
done
finish
