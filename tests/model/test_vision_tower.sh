#!/usr/bin/env bash
# The vision tower and the aligner (issue "Native vision"): `cedar image --embed` in reference
# mode gives the numpy reference's aligner rows (tools/reference/vision.py) bit for bit on tiny
# checkpoints of two seeds, for images whose patch grid is and is not a multiple of the 3x3 cell
# and one the processor scales up; the fast kernels stay close (relative L2 reported, a loose
# bound catches a broken kernel); a model without a tower and --embed without -m are clean errors.
source "$(dirname "$0")/lib.sh"
"$PY" - "$WORK" <<'PYEOF'
import sys
import numpy as np
from PIL import Image
w = sys.argv[1]
rng = np.random.default_rng(7)
a = (rng.random((200, 260, 3)) * 255).astype(np.uint8)
a[50:120, 30:200] = [200, 30, 40]
Image.fromarray(a).save(f"{w}/grid_pad.png")
yy, xx = np.mgrid[0:224, 0:224]
b = np.stack([xx, yy, (xx + yy) // 2], axis=-1).astype(np.uint8)
Image.fromarray(b).save(f"{w}/grid_exact.png")
c = (rng.random((40, 90, 3)) * 255).astype(np.uint8)
Image.fromarray(c).save(f"{w}/small.jpg", quality=90)
PYEOF
compare() {  # compare MODEL IMAGE
  local m=$1 img=$2 tag
  tag=$(basename "$m")-$(basename "$img")
  "$CEDAR_BIN" image "$img" -m "$m" --embed "$WORK/$tag.ref.npy" --kernels ref >/dev/null &&
    "$CEDAR_BIN" image "$img" -m "$m" --embed "$WORK/$tag.fast.npy" >/dev/null &&
    "$PY" "$CEDAR_SOURCE_DIR/tools/reference/vision.py" --model "$m" --image "$img" \
      --out "$WORK/$tag.np.npy" >/dev/null &&
    "$PY" - "$WORK/$tag" <<'PYEOF'
import sys
import numpy as np
t = sys.argv[1]
ref, fast, oracle = (np.load(f"{t}.{k}.npy") for k in ("ref", "fast", "np"))
if ref.shape != oracle.shape:
    sys.exit(f"{t}: shape {ref.shape} != reference {oracle.shape}")
diff = int((ref.view(np.uint32) != oracle.view(np.uint32)).sum())
rel = float(np.linalg.norm(fast - ref) / max(np.linalg.norm(ref), 1e-30))
print(f"  {t.rsplit('/', 1)[1]}: {ref.shape[0]} rows x {ref.shape[1]}, ref vs numpy {diff} "
      f"elements differ; fast vs ref relative L2 {rel:.2e}")
sys.exit(1 if diff or not rel < 0.05 or not np.isfinite(ref).all() else 0)
PYEOF
}
for seed in 0 1; do
  M="$WORK/tiny$seed"
  "$CEDAR_BIN" make-model --preset tiny --seed "$seed" --out "$M" >/dev/null
  for img in grid_pad.png grid_exact.png small.jpg; do
    check "vision tower tiny seed $seed $img" compare "$M" "$WORK/$img"
  done
done
# a model without a vision tower: the trained default keeps none
check "--embed on a model without a tower" \
  refuses "no vision tower" "$CEDAR_BIN" image "$WORK/small.jpg" -m "$CEDAR_BINARY_DIR/models/default" --embed "$WORK/x.npy"
check "--embed without -m" refuses "needs the model" "$CEDAR_BIN" image "$WORK/small.jpg" --embed "$WORK/x.npy"
finish
