#!/usr/bin/env bash
# The low-bit rungs on the small preset, whose 256-wide rows take the K-quant and IQ types:
# `cedar convert --type iq2_xxs` (ds4's Q2 recipe: IQ2_XXS gate/up experts), `--type iq1_s`
# (IQ1_S gate/up experts) and `--type q3_k_m` (the llama.cpp rung: Q3_K gate/up experts and FP8
# weights, the head as Q6_K). The census names the types, the block weights are computed in
# place, each model keeps the structural invariants of every model (one-shot = chunked = token by
# token, reference and fast kernels). How close the fast families stay to the reference per
# product is tests/unit/kernels/block_gemm_test.cpp's (a random-weight model amplifies any
# rounding difference into different logits, so it cannot say); how close each encoder's blocks
# decode to its input is tests/unit/model/gguf_{encode,iq_decode}_test.cpp's.
source "$(dirname "$0")/lib.sh"
M="$WORK/small"
"$CEDAR_BIN" make-model --preset small --seed 2 --out "$M" >/dev/null
make_ids 4 90 "$WORK/ids"
# rung, a type of its census with its tensor count (40 layers x gate/up = 80; 7 FP8 weights of
# 256-wide rows in each of 40 layers = 280; the head)
for rung in "iq2_xxs IQ2_XXS 80" "iq1_s IQ1_S 80" "q3_k_m Q3_K 280" "q3_k_m Q6_K 1"; do
  read -r q t n <<<"$rung"
  G="$WORK/$q.gguf"
  [ -f "$G" ] || "$CEDAR_BIN" convert --from "$M" --to "$G" --type "$q" >/dev/null
  "$CEDAR_BIN" inspect --model "$G" >"$WORK/inspect.txt"
  check "$q: census $t" grep -Eq "^ +$t +$n tensors" "$WORK/inspect.txt"
  check "$q: in place" grep -Eq "load: .* [1-9][0-9]* weights computed in place as GGUF blocks" \
    "$WORK/inspect.txt"
  [ "$t" = Q6_K ] || invariant_logits "$G" "$WORK/ids" "$q"
done
# the Q6_K head is not a GEMM weight of the block families: re-encoded into the release's BF16
check "q3_k_m: the head re-encoded" grep -Eq "[1-9][0-9]* re-encoded into the release formats" \
  "$WORK/inspect.txt"
finish
