#!/usr/bin/env bash
# tools/anchor/anchor.py in seconds (never a timing assertion): cedar alone on a tiny checkpoint,
# one round, every kind of test, and a second cedar column (--cedar-variant: the head
# requantized); the table has a row per test with a positive figure per column and the JSON the
# medians of what it printed. An unknown test and a llama.cpp engine without its GGUF
# are refused.
source "$(dirname "$0")/lib.sh"
M="$WORK/tiny"
"$CEDAR_BIN" make-model --preset tiny --seed 5 --out "$M" >/dev/null
TOOL="$CEDAR_SOURCE_DIR/tools/anchor/anchor.py"
"$PY" "$TOOL" --cedar "$CEDAR_BIN" --model "$M" --tests decode,pp32,b16,decode@64 --rounds 1 \
  --cedar-variant "q8=--head-type q8" --gen 4 --quiet-wait 0 --tries 1 --json "$WORK/a.json" >"$WORK/table.txt" 2>"$WORK/log.txt"
cat "$WORK/table.txt"
check "one row per test, medians in the JSON" "$PY" - "$WORK/table.txt" "$WORK/a.json" <<'PYEOF'
import json, sys
table = open(sys.argv[1]).read().splitlines()
med = json.load(open(sys.argv[2]))["medians"]
rows = {l[:26].strip(): l[26:].split() for l in table[1:-1]}
want = ["decode", "pp32", "pp32 ced", "b16", "b16 GFLOP/s", "decode@64",
        "read GB/s (cedar probe)", "FMA peak GFLOP/s"]
assert list(rows)[:len(want)] == want, list(rows)
assert all(r.endswith(" GFLOP/s") for r in list(rows)[len(want):]), list(rows)  # dot products
assert table[0].split()[-2:] == ["cedar", "q8"], table[0]
for t in want:
    for col, name in enumerate(["cedar", "q8"]):
        v = float(rows[t][col])
        assert v > 0 and abs(v - med[t][name]) <= 0.01, (t, name, v, med[t])
assert table[-1].startswith("1 rounds interleaved"), table[-1]
PYEOF
check "an unknown test" refuses "unknown test 'tg64'" \
  "$PY" "$TOOL" --cedar "$CEDAR_BIN" --model "$M" --tests tg64
check "a variant without a name" refuses "wants NAME=ARGS" \
  "$PY" "$TOOL" --cedar "$CEDAR_BIN" --model "$M" --cedar-variant "--head-type q8"
check "--ik without --gguf" refuses "need --gguf" \
  "$PY" "$TOOL" --cedar "$CEDAR_BIN" --model "$M" --ik /bin/true
finish
