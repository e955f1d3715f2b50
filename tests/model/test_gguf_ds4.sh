#!/usr/bin/env bash
# Dialect B, ds4's layout (spec v41-gguf.md §4): `cedar convert --dialect ds4` writes ds4's keys
# (the config as JSON, the Engram constants) and tensors (ds4's Engram projection names, the Engram
# tables as native rows at the end, 16 KiB alignment, llama.cpp's tokenizer keys only), and cedar
# reads it back: dialect B, the Engram rows and projections identical to the release values the
# numpy reference decodes, the directory's logits bit for bit (one-shot, chunked, decode; reference
# and fast kernels) and its generated text; a lossy ds4 file's weights computed in place; the
# Engram rows read in place, one holding a NaN code (which ds4 refuses too) refused when read.
source "$(dirname "$0")/lib.sh"
M="$WORK/tiny"
G="$WORK/ds4.gguf"
"$CEDAR_BIN" make-model --preset tiny --seed 3 --out "$M" >/dev/null
check "convert" grep -q "dialect B" <("$CEDAR_BIN" convert --from "$M" --to "$G" --dialect ds4)
"$CEDAR_BIN" inspect --model "$G" >"$WORK/inspect.txt"
check "dialect B" grep -q "dialect: B (ds4)" "$WORK/inspect.txt"
check "alignment" grep -q "alignment 16384" "$WORK/inspect.txt"
check "I8 rows" grep -Eq "^ +I8 +2 tensors" "$WORK/inspect.txt"
check "lossless" grep -q "0 values not exactly representable" "$WORK/inspect.txt"
for t in layers.1.engram.embed.weight layers.2.engram.embed.weight layers.1.engram.wkv.weight \
         layers.1.engram.q_weight layers.2.engram.k_weight layers.0.attn.wq_a.weight \
         layers.1.ffn.experts.3.w1.weight; do
  "$CEDAR_BIN" inspect --model "$G" --tensor "$t" --out "$WORK/t.npy" >/dev/null
  check "$t" "$PY" "$CEDAR_SOURCE_DIR/tests/model/compare_gguf_tensor.py" "$M" "$t" "$WORK/t.npy"
done
make_ids 15 150 "$WORK/ids"
same_logits "$M" "$G" "$WORK/ids"
run() { "$CEDAR_BIN" run -m "$1" --raw -p "The 12 quick brown foxes, 日本語" --temp 0 -n 8 2>/dev/null; }
run "$M" >"$WORK/dir.txt"
run "$G" >"$WORK/ds4.txt"
check "run: same text" cmp -s "$WORK/dir.txt" "$WORK/ds4.txt"
# a lossy ds4 file: the block weights computed in place, the Engram rows still the source bytes
"$CEDAR_BIN" convert --from "$M" --to "$WORK/q4.gguf" --dialect ds4 --type q4_k >/dev/null
"$CEDAR_BIN" inspect --model "$WORK/q4.gguf" >"$WORK/q4.txt"
check "q4_k: in place" grep -Eq "load: .* [1-9][0-9]* weights computed in place" "$WORK/q4.txt"
"$CEDAR_BIN" inspect --model "$WORK/q4.gguf" --tensor layers.2.engram.embed.weight --out "$WORK/t.npy" >/dev/null
check "q4_k: Engram rows exact" "$PY" "$CEDAR_SOURCE_DIR/tests/model/compare_gguf_tensor.py" "$M" \
  layers.2.engram.embed.weight "$WORK/t.npy"
check "q4_k: runs" "$CEDAR_BIN" run -m "$WORK/q4.gguf" --raw -p "The quick brown" --temp 0 -n 4
# a NaN code in every row of the last Engram table (row 0 found by its source bytes; the rows
# follow at 264-byte steps): the file loads (the rows stay in the file, never read whole) and the
# first row a token reads is refused with its number, as ds4 refuses it at read time
"$PY" - "$M" "$G" "$WORK/nan.gguf" <<'PYEOF'
import os, sys
sys.path.insert(0, os.path.join(os.environ["CEDAR_SOURCE_DIR"], "tools", "reference"))
from checkpoint import Checkpoint
model, src, dst = sys.argv[1:4]
ck = Checkpoint(model)
name = "layers.2.engram.embed"
codes = ck.where[name + ".weight"].raw(name + ".weight")
scales = ck.where[name + ".scale"].raw(name + ".scale")
row = codes[0].tobytes() + scales[0].tobytes()
data = bytearray(open(src, "rb").read())
at = data.find(row)
assert at >= 0 and data.find(row, at + 1) < 0, "row 0 not found once"
assert data[at + 5 * len(row):at + 6 * len(row)] == codes[5].tobytes() + scales[5].tobytes()
for r in range(codes.shape[0]):
    data[at + r * len(row) + 3] = 0x7F
open(dst, "wb").write(data)
PYEOF
check "NaN row: loads" "$CEDAR_BIN" inspect --model "$WORK/nan.gguf"
check "NaN row refused when read" refuses "layers.2.engram.embed.weight: row [0-9]* holds a NaN" \
  "$CEDAR_BIN" logits -m "$WORK/nan.gguf" --ids 1,2 --out "$WORK/x.npy"
finish
