#!/usr/bin/env bash
# The IQ2_XXS rung (`cedar convert --type iq2_xxs`, ds4's Q2 recipe) on the small preset, whose
# 256-wide expert rows take IQ2_XXS: the census names the types, the IQ2_XXS expert weights are
# computed in place, the model keeps the structural invariants of every model (one-shot = chunked
# = token by token, reference and fast kernels). How close the fast family stays to the reference
# per product is tests/unit/kernels/block_gemm_test.cpp's (a random-weight model amplifies any
# rounding difference into different logits, so it cannot say).
source "$(dirname "$0")/lib.sh"
M="$WORK/small"
G="$WORK/iq2.gguf"
"$CEDAR_BIN" make-model --preset small --seed 2 --out "$M" >/dev/null
"$CEDAR_BIN" convert --from "$M" --to "$G" --type iq2_xxs >/dev/null
"$CEDAR_BIN" inspect --model "$G" >"$WORK/inspect.txt"
check "census: IQ2_XXS" grep -Eq "^ +IQ2_XXS +80 tensors" "$WORK/inspect.txt"
check "census: Q8_0" grep -Eq "^ +Q8_0 " "$WORK/inspect.txt"
check "in place" grep -Eq "load: .* [1-9][0-9]* weights computed in place as GGUF blocks" "$WORK/inspect.txt"
make_ids 4 90 "$WORK/ids"
invariant_logits "$G" "$WORK/ids" "iq2_xxs"
finish
