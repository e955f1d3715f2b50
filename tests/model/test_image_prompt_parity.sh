#!/usr/bin/env bash
# Images in the prompt (issue "Native vision"): `cedar logits --image` in reference mode against
# the numpy oracle (tools/reference/logits.py --image) on tiny checkpoints of two seeds --
# full-vocabulary logits at every position bit-identical for a prompt with one image between
# text and one with two (the second right after the first's text), in one call, in chunks whose
# boundaries fall inside the spans and token by token. The spans' rows route with bias_vl and are
# DEAD for Engram (tiny has Engram layers 1 and 3 and routed MoE in every block), so a wrong flag
# anywhere moves the logits. Also: a placeholder count that does not match the images and an
# image for a model without a tower are clean errors.
source "$(dirname "$0")/lib.sh"
"$PY" - "$WORK" <<'PYEOF'
import sys
import numpy as np
from PIL import Image
w = sys.argv[1]
rng = np.random.default_rng(11)
Image.fromarray((rng.random((60, 80, 3)) * 255).astype(np.uint8)).save(f"{w}/a.png")
Image.fromarray((rng.random((90, 40, 3)) * 255).astype(np.uint8)).save(f"{w}/b.jpg", quality=85)
PYEOF
# with_placeholders SEED N OUT AT...: N random ids with the image placeholder inserted at AT...
with_placeholders() {
  local seed=$1 n=$2 out=$3
  shift 3
  make_ids "$seed" "$n" "$out.raw"
  "$PY" - "$out.raw" "$out" "$@" <<'PYEOF'
import sys
ids = open(sys.argv[1]).read().strip().split(",")
for at in sorted((int(a) for a in sys.argv[3:]), reverse=True):
    ids.insert(at, "129264")
open(sys.argv[2], "w").write(",".join(ids))
PYEOF
}
for seed in 0 1; do
  M="$WORK/tiny$seed"
  "$CEDAR_BIN" make-model --preset tiny --seed "$seed" --out "$M" >/dev/null
  with_placeholders "$seed" 40 "$WORK/one.txt" 25
  with_placeholders "$seed" 30 "$WORK/two.txt" 3 10
  "$PY" "$REF" --model "$M" --ids-file "$WORK/one.txt" --image "$WORK/a.png" --out "$WORK/one.ref.npy"
  "$PY" "$REF" --model "$M" --ids-file "$WORK/two.txt" --image "$WORK/a.png" \
    --image "$WORK/b.jpg" --out "$WORK/two.ref.npy"
  for split in "" "--chunk 37" "--chunk 100" "--decode"; do
    "$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/one.txt" --image "$WORK/a.png" \
      --kernels ref $split --out "$WORK/c.npy" 2>/dev/null
    check "one image seed $seed $split" "$PY" "$CMP" "$WORK/c.npy" "$WORK/one.ref.npy" \
      --label "one image seed=$seed ${split:-one-shot}"
    "$CEDAR_BIN" logits --model "$M" --ids-file "$WORK/two.txt" --image "$WORK/a.png,$WORK/b.jpg" \
      --kernels ref $split --out "$WORK/c.npy" 2>/dev/null
    check "two images seed $seed $split" "$PY" "$CMP" "$WORK/c.npy" "$WORK/two.ref.npy" \
      --label "two images seed=$seed ${split:-one-shot}"
  done
done
check "two placeholders, one image" refuses "2 image placeholders for 1 images" \
  "$CEDAR_BIN" logits --model "$WORK/tiny0" --ids-file "$WORK/two.txt" --image "$WORK/a.png" \
  --out "$WORK/x.npy"
check "an image for a model without a tower" refuses "no vision tower" \
  "$CEDAR_BIN" logits --model "$CEDAR_BINARY_DIR/models/default" --ids 0,129264,5 \
  --image "$WORK/a.png" --out "$WORK/x.npy"
finish
