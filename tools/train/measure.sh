#!/usr/bin/env bash
# The quality measurements of docs/TRAINING.md, on one model and one data directory:
#   bash tools/train/measure.sh [MODEL_DIR] DATA_DIR [OUT_DIR]
# MODEL_DIR defaults to the embedded default model (build/models/default). Prints one line per
# measurement and writes the JSON outputs to OUT_DIR (default /tmp/cedar-measure).
#  1. held-out perplexity per corpus source (fast kernels, CED prefill, -c 512)
#  2. the same with --exact-prefill (CED vs exact)
#  3. reference kernels on the first 12 windows of two sources (ref vs fast on the same windows)
#  4. prefix-cache restore with bounded replay vs a cold run: greedy continuations of held-out
#     prompts, cold and then restored from a --cache-dir, token agreement
#  5. chat accuracy on held-out conversations (tools/train/eval_chat.py)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CEDAR=${CEDAR_BIN:-$ROOT/build/cedar}
if [ $# -ge 2 ] && [ -d "$1" ] && [ -f "$1/config.json" ]; then MODEL=$1; shift; else MODEL=$ROOT/build/models/default; fi
DATA=$1
OUT=${2:-/tmp/cedar-measure}
mkdir -p "$OUT"
ppl() {  # ppl LABEL ARGS...: one perplexity run, JSON kept, one line printed
  local label=$1
  shift
  "$CEDAR" perplexity -m "$MODEL" --json "$@" >"$OUT/$label.json" 2>/dev/null
  /usr/bin/python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print("%-16s ppl %9.3f  scored %6d tokens in %d windows" % (sys.argv[2], j["perplexity"], j["tokens"], j["windows"]))' "$OUT/$label.json" "$label"
}
for f in "$DATA"/heldout/*.txt; do
  src=$(basename "$f" .txt)
  ppl "$src.ced" -f "$f" -c 512
  ppl "$src.exact" -f "$f" -c 512 --exact-prefill
done
for src in bible python; do
  ppl "$src.fast12" -f "$DATA/heldout/$src.txt" -c 512 --chunks 12
  ppl "$src.ref12" -f "$DATA/heldout/$src.txt" -c 512 --chunks 12 --kernels ref
done
# 4. restore vs cold: the first 600 tokens' worth of text of held-out documents as raw prompts
/usr/bin/python3 - "$DATA/heldout" "$OUT" <<'PYEOF'
import os, sys
src, out = sys.argv[1], sys.argv[2]
for name in ("bible", "jargon", "wordnet"):
    text = open(os.path.join(src, name + ".txt"), encoding="utf-8").read()
    for i in range(2):
        open(os.path.join(out, f"prompt_{name}_{i}.txt"), "w").write(text[i * 4000 : i * 4000 + 2400])
PYEOF
agree=0
total=0
for p in "$OUT"/prompt_*.txt; do
  cache=$(mktemp -d)
  "$CEDAR" run -m "$MODEL" --raw -f "$p" -n 32 --temp 0 --cache-dir "$cache" --cache-interval 256 \
    >"$OUT/cold.txt" 2>/dev/null
  "$CEDAR" run -m "$MODEL" --raw -f "$p" -n 32 --temp 0 --cache-dir "$cache" --cache-interval 256 \
    >"$OUT/warm.txt" 2>"$OUT/warm.err"
  rm -rf "$cache"
  r=$(/usr/bin/python3 -c 'import sys; a=open(sys.argv[1]).read(); b=open(sys.argv[2]).read(); n=0
while n < min(len(a), len(b)) and a[n] == b[n]: n += 1
print(int(a == b), n, len(a))' "$OUT/cold.txt" "$OUT/warm.txt")
  set -- $r
  agree=$((agree + $1))
  total=$((total + 1))
  echo "restore vs cold $(basename "$p"): identical=$1, common prefix $2 of $3 chars; $(grep -o '[0-9]* cached' "$OUT/warm.err" | head -1)"
done
echo "restore vs cold: $agree of $total greedy continuations identical"
/usr/bin/python3 "$HERE/eval_chat.py" --cedar "$CEDAR" --model "$MODEL" \
  --conversations "$DATA/heldout/synth.jsonl" --per-kind 40 --json | tee "$OUT/chat.txt"
