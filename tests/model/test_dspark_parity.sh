#!/usr/bin/env bash
# The DSpark drafter in reference mode vs the numpy oracle (tools/reference/draft.py): after a
# prompt, one draft cycle's tokens, draft logits (full vocabulary, Markov bias included) and
# confidence logits must be bit-identical -- for prompts shorter than, equal to and longer than
# the 128-slot ring (ring wrap), with the prompt fed at once, in chunks and token by token (the
# rings are seeded by every forward), with the argmax anchor and a given one, on tiny and small.
# The fast kernels run the same draft within a stated tolerance.
source "$(dirname "$0")/lib.sh"
DRAFT="$CEDAR_SOURCE_DIR/tools/reference/draft.py"

same_draft() {  # same_draft DIR_A DIR_B: the three outputs are equal bit for bit
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
import numpy as np
a, b = sys.argv[1], sys.argv[2]
for f in ("tokens", "logits", "confidence"):
    x, y = np.load(f"{a}/{f}.npy"), np.load(f"{b}/{f}.npy")
    if x.shape != y.shape or not np.array_equal(x.astype(np.float64), y.astype(np.float64)):
        bad = "shape" if x.shape != y.shape else f"{int((x != y).sum())} entries differ"
        print(f"  {f}: {bad}")
        sys.exit(1)
PYEOF
}

run_case() {  # run_case PRESET SEED T [--anchor ID]
  local preset=$1 seed=$2 n=$3
  shift 3
  local M="$WORK/$preset$seed"
  [ -d "$M" ] || "$CEDAR_BIN" make-model --preset "$preset" --seed "$seed" --out "$M" >/dev/null
  make_ids "$seed" "$n" "$WORK/ids.txt"
  (cd "$CEDAR_SOURCE_DIR/tools/reference" &&
    "$PY" "$DRAFT" --model "$M" --ids "$(cat "$WORK/ids.txt")" --out-dir "$WORK/ref" "$@")
  for split in "" "--chunk 37" "--decode"; do
    [ "$split" = "--decode" ] && [ "$n" -gt 200 ] && continue
    # shellcheck disable=SC2086
    "$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/ids.txt" --kernels ref $split \
      --out "$WORK/l.npy" --draft-out "$WORK/c" "$@" 2>/dev/null
    check "$preset seed $seed T=$n $split $*" same_draft "$WORK/ref" "$WORK/c"
  done
}

same_run() {  # same_run MODEL ARGS...: cedar run's output with and without speculation
  local M=$1
  shift
  "$CEDAR_BIN" run -m "$M" --raw "$@" --speculative off >"$WORK/plain.txt" 2>/dev/null
  "$CEDAR_BIN" run -m "$M" --raw "$@" --speculative dspark >"$WORK/spec.txt" 2>/dev/null
  cmp -s "$WORK/plain.txt" "$WORK/spec.txt" || { echo "  outputs differ"; return 1; }
}

for seed in 1 2; do
  for n in 1 5 127 128 129 200; do run_case tiny "$seed" "$n"; done
done
run_case tiny 3 150 --anchor 128799
run_case small 1 150
# speculative decoding changes no byte of the output, greedy or sampled, on both presets
for preset in tiny1 small1; do
  for p in "The capital of France is" "def fibonacci(n):"; do
    check "$preset run greedy '$p'" same_run "$WORK/$preset" -p "$p" -n 24 --temp 0
    check "$preset run sampled '$p'" same_run "$WORK/$preset" -p "$p" -n 24 --temp 0.9 --seed 3
  done
done
finish
