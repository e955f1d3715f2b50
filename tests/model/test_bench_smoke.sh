#!/usr/bin/env bash
# `cedar bench` in seconds (never a timing assertion): on a tiny checkpoint with a vision tower the
# JSON report holds the machine probes, one prefill run, decode, and the image encode section at
# the processor's token limit (a 4096^2 image -> 1302^2 px, 93 x 93 patches, 994 tokens, its
# FLOPs counted from the tower's shape); --vision off drops the section; --vision on on a model
# without a tower is refused; --head-type q8 counts the requantized head's bytes.
source "$(dirname "$0")/lib.sh"
M="$WORK/tiny"
"$CEDAR_BIN" make-model --preset tiny --seed 4 --out "$M" >/dev/null
FLAGS=(--prompt 16 --gen 2 --reps 1 --batch 0 --probe-passes 1 --bw-mib 16 --speculative off
       --plans exact --json)
"$CEDAR_BIN" bench -m "$M" "${FLAGS[@]}" >"$WORK/b.json" 2>/dev/null
check "bench JSON with the vision section" "$PY" - "$WORK/b.json" <<'PYEOF'
import json, math, sys
b = json.load(open(sys.argv[1]))
v = b["vision"]
assert v["tokens"] == 994 and v["patches"] == 93 * 93, v
assert v["resized"] == [1302, 1302], v
# tiny's tower: width 64, 2 blocks, MLP 128, 4 heads; aligner 576 -> 128 -> 128
n, V, I, T, D = 8649, 64, 128, 961, 128
blk = 2*n*V*3*V + 4*n*n*V + 2*n*V*V + 2*n*V*2*I + 2*n*I*V
want = 2*n*588*V + 2*blk + 2*T*9*V*D + 2*T*D*D
assert abs(v["encode_gflop"] * 1e9 - want) < 1e3, (v["encode_gflop"], want / 1e9)
for k in ("encode_s", "preprocess_s", "encode_gflop_per_s", "ratio_fma_peak"):
    assert math.isfinite(v[k]) and v[k] > 0, (k, v[k])
assert b["runs"] and b["machine"]["fma_peak"]["median"] > 0
print(f"  image encode {v['encode_s']:.2f} s, {v['encode_gflop_per_s']:.1f} GFLOP/s "
      f"({100 * v['ratio_fma_peak']:.1f}% of the FMA peak)")
PYEOF
"$CEDAR_BIN" bench -m "$M" "${FLAGS[@]}" --vision off >"$WORK/b2.json" 2>/dev/null
check "--vision off" "$PY" -c "import json,sys; assert json.load(open(sys.argv[1]))['vision'] is None" "$WORK/b2.json"
# --head-type q8: the bench counts the head's Q8B bytes (34 per 32 values instead of 64), and the
# memory plan holds the copy
"$CEDAR_BIN" bench -m "$M" "${FLAGS[@]}" --vision off --head-type q8 >"$WORK/b3.json" 2>/dev/null
"$CEDAR_BIN" inspect -m "$M" --plan --json --head-type q8 >"$WORK/p.json"
check "--head-type q8 in bench and the plan" "$PY" - "$WORK/b2.json" "$WORK/b3.json" "$WORK/p.json" "$M/config.json" <<'PYEOF'
import json, sys
b2, b3, plan, cfg = (json.load(open(f)) for f in sys.argv[1:5])
cfg = cfg.get("text_config", cfg)
V, D = cfg["vocab_size"], cfg["hidden_size"]
q8 = V * D + V * (D // 32) * 2
assert b2["head_type"] == "stored" and b3["head_type"] == "q8", (b2["head_type"], b3["head_type"])
w2 = b2["runs"][0]["decode"]["bytes_per_token"]["weights"]
w3 = b3["runs"][0]["decode"]["bytes_per_token"]["weights"]
assert w2 - w3 == V * D * 2 - q8, (w2, w3, V * D * 2 - q8)
assert plan["head_copy"] == q8, plan
PYEOF
check "--head-type q4" refuses "must be stored or q8" \
  "$CEDAR_BIN" bench -m "$M" "${FLAGS[@]}" --head-type q4
check "--vision on without a tower" refuses "no vision tower" \
  "$CEDAR_BIN" bench -m "$CEDAR_BINARY_DIR/models/default" "${FLAGS[@]}" --vision on
finish
