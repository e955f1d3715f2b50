#!/usr/bin/env bash
# Routed experts and Engram rows streamed from storage (issue "Beyond RAM"): logits computed with
# the experts read into a small cache (forward/expert_cache.h) and the Engram rows read through a
# row cache (forward/engram_store.h) equal the mapped run's bit for bit, in reference mode and
# with the fast kernels, one-shot, chunked and token by token, with caches smaller than one
# pass's experts / rows and larger; the DSpark draft too. `cedar run` under
# a --mem-budget that streams the experts prints the same greedy text; a plan that cannot fit is
# refused with a message naming memory; inside a memory cgroup far smaller than the checkpoint a
# run completes with the same text (where this machine lets the test make a cgroup). GGUF files
# stream their in-place experts and ds4's native Engram rows the same way.
source "$(dirname "$0")/lib.sh"

same_file() { cmp -s "$1" "$2" || { echo "  $1 and $2 differ"; return 1; }; }

M="$WORK/small"
"$CEDAR_BIN" make-model --preset small --seed 4 --out "$M" >/dev/null
make_ids 4 90 "$WORK/ids.txt"
for k in ref auto; do
  for split in "" "--chunk 29" "--decode"; do
    # shellcheck disable=SC2086
    "$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids.txt" --kernels $k $split \
      -o "$WORK/mapped.npy" 2>/dev/null
    for how in "--expert-slots 2" "--expert-slots 7" "--expert-slots 1000" \
      "--engram-cache 1" "--engram-cache 4096 --expert-slots 5"; do
      # shellcheck disable=SC2086
      "$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids.txt" --kernels $k $split $how \
        -o "$WORK/streamed.npy" 2>"$WORK/err.txt"
      check "logits $k $split $how" same_file "$WORK/mapped.npy" "$WORK/streamed.npy"
    done
  done
done
check "the caches report their reads" grep -q "MiB read in" "$WORK/err.txt"
check "the Engram store reports its rows" grep -q "Engram store: [1-9][0-9]* row lookups" \
  "$WORK/err.txt"

# the DSpark draft (its stages have routed experts too) on the default (trained) model
D="${CEDAR_BINARY_DIR:-$CEDAR_SOURCE_DIR/build}/models/default"
if [ -d "$D" ]; then
  head_ids "$WORK/ids.txt" 40 "$WORK/ids40.txt"
  "$CEDAR_BIN" logits -m "$D" --ids-file "$WORK/ids40.txt" --kernels ref -o "$WORK/a.npy" \
    --draft-out "$WORK/da" 2>/dev/null
  "$CEDAR_BIN" logits -m "$D" --ids-file "$WORK/ids40.txt" --kernels ref -o "$WORK/b.npy" \
    --draft-out "$WORK/db" --expert-slots 2 --engram-cache 1 2>/dev/null
  for f in a.npy da/logits.npy da/confidence.npy da/tokens.npy; do
    check "default model $f" same_file "$WORK/$f" "$WORK/${f/a/b}"
  done
fi

# cedar run under a budget that leaves the experts a few slots: streamed, same text
plan() { "$CEDAR_BIN" inspect -m "$M" --plan --json --ctx-size 2048 "$@"; }
budget=$(plan | "$PY" -c "import json,sys; p=json.load(sys.stdin)
print(p['dense'] + p['kv'] + p['workspace'] + p['engram_tables'] + 3 * p['min_expert_slots'] * p['expert_slot'])")
plan --mem-budget "$budget" >"$WORK/plan.json"
check "inspect --plan streams under $budget bytes" \
  "$PY" -c "import json,sys; p=json.load(open(sys.argv[1])); sys.exit(0 if p['streamed'] else 1)" \
  "$WORK/plan.json"
P="In the beginning God created the heaven and the earth."
"$CEDAR_BIN" run -m "$M" --raw -p "$P" -n 24 --temp 0 -c 2048 >"$WORK/run_mapped.txt" 2>/dev/null
"$CEDAR_BIN" run -m "$M" --raw -p "$P" -n 24 --temp 0 -c 2048 --mem-budget "$budget" \
  >"$WORK/run_streamed.txt" 2>"$WORK/run_err.txt"
check "run --mem-budget: same greedy text" same_file "$WORK/run_mapped.txt" "$WORK/run_streamed.txt"
check "run --mem-budget says it streams" grep -q "streamed from storage" "$WORK/run_err.txt"

# admission: a plan that cannot fit is refused before serving, with the numbers
refused() {  # refused CMD...: exit status non-zero and a message naming memory and the flag
  if "$@" >"$WORK/out.txt" 2>&1; then echo "  accepted: $*"; return 1; fi
  grep -q "memory: the plan needs .* --mem-budget is" "$WORK/out.txt" ||
    { echo "  no memory message:"; cat "$WORK/out.txt"; return 1; }
}
check "serve refuses 64 x 1M tokens in 1G" refused timeout 120 "$CEDAR_BIN" serve -m "$M" \
  --port 0 --mem-budget 1G -c 1048576 --parallel 64
check "run refuses a budget below the dense weights" refused "$CEDAR_BIN" run -m "$M" --raw \
  -p "$P" -n 4 --mem-budget 64M
check "inspect --plan exits 1 on a refused plan" refused plan --mem-budget 64M
kv_refused() {  # a KV pool smaller than one full-context sequence is refused before serving
  if "$@" >"$WORK/out.txt" 2>&1; then echo "  accepted: $*"; return 1; fi
  grep -q "memory: --kv-ram .* cannot hold one sequence of 4096 tokens" "$WORK/out.txt" ||
    { echo "  no --kv-ram message:"; cat "$WORK/out.txt"; return 1; }
}
check "serve refuses a --kv-ram below one sequence" kv_refused timeout 120 "$CEDAR_BIN" serve \
  -m "$M" --port 0 -c 4096 --parallel 8 --kv-ram 64K
if "$CEDAR_BIN" run -m "$M" --raw -p "$P" --mem-budget 12Q >"$WORK/out.txt" 2>&1; then
  FAILS=$((FAILS + 1)); echo "  ^ failed: a malformed --mem-budget was accepted"
else
  check "a malformed --mem-budget is named" grep -q "mem-budget must be a size" "$WORK/out.txt"
fi

# GGUF files: routed experts computed in place (merged MXFP4 tensors) stream from the file like
# the directory's; ds4's native Engram rows too, and a dialect-A Engram table stored as blocks
# (Q8_0 here); a lossless file's BF16 Engram tables, re-encoded into memory at load, cannot be
# read back from the file: the plan counts them as resident, not streamable
G="$WORK/small.gguf"
"$CEDAR_BIN" convert --from "$M" --to "$G" >/dev/null
"$CEDAR_BIN" convert --from "$M" --to "$WORK/ds4.gguf" --dialect ds4 >/dev/null
head_ids "$WORK/ids.txt" 48 "$WORK/ids48.txt"
for k in ref auto; do
  "$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids48.txt" --kernels $k -o "$WORK/mapped.npy" 2>/dev/null
  for split in "" "--decode"; do
    # shellcheck disable=SC2086
    "$CEDAR_BIN" logits -m "$G" --ids-file "$WORK/ids48.txt" --kernels $k $split --expert-slots 2 \
      -o "$WORK/g.npy" 2>"$WORK/err.txt"
    check "gguf: experts streamed, $k $split" same_file "$WORK/mapped.npy" "$WORK/g.npy"
    # shellcheck disable=SC2086
    "$CEDAR_BIN" logits -m "$WORK/ds4.gguf" --ids-file "$WORK/ids48.txt" --kernels $k $split \
      --expert-slots 3 --engram-cache 1 -o "$WORK/g.npy" 2>"$WORK/err_ds4.txt"
    check "ds4 gguf: experts and Engram rows streamed, $k $split" same_file "$WORK/mapped.npy" "$WORK/g.npy"
  done
done
check "gguf: the expert cache read from the file" grep -q "MiB read in" "$WORK/err.txt"
check "ds4 gguf: the Engram store read rows" grep -q "Engram store: [1-9][0-9]* row lookups" \
  "$WORK/err_ds4.txt"
gplan() { "$CEDAR_BIN" inspect -m "$G" --plan --json --ctx-size 2048 "$@"; }
gplan >"$WORK/gplan.json"
check "gguf plan: dialect A's Engram tables resident, the experts in the file" "$PY" -c "
import json, sys
p = json.load(open(sys.argv[1]))
sys.exit(0 if p['engram_tables'] == 0 and p['routed_experts'] > 0 else 1)" "$WORK/gplan.json"
gbudget=$("$PY" -c "import json,sys; p=json.load(open(sys.argv[1]))
print(p['dense'] + p['kv'] + p['workspace'] + 3 * p['min_expert_slots'] * p['expert_slot'])" "$WORK/gplan.json")
"$CEDAR_BIN" run -m "$G" --raw -p "$P" -n 24 --temp 0 -c 2048 --mem-budget "$gbudget" \
  >"$WORK/run_gguf.txt" 2>"$WORK/run_err.txt"
check "gguf run --mem-budget: the directory's greedy text" same_file "$WORK/run_mapped.txt" \
  "$WORK/run_gguf.txt"
check "gguf run --mem-budget says it streams" grep -q "streamed from storage" "$WORK/run_err.txt"
# the Q8_0 file: its Engram tables stay in the file (rows decoded as gathered), so they stream
"$CEDAR_BIN" convert --from "$M" --to "$WORK/q8.gguf" --type q8_0 >/dev/null
for k in ref auto; do
  "$CEDAR_BIN" logits -m "$WORK/q8.gguf" --ids-file "$WORK/ids48.txt" --kernels $k \
    -o "$WORK/q8_mapped.npy" 2>/dev/null
  for split in "" "--decode"; do
    # shellcheck disable=SC2086
    "$CEDAR_BIN" logits -m "$WORK/q8.gguf" --ids-file "$WORK/ids48.txt" --kernels $k $split \
      --engram-cache 1 -o "$WORK/g.npy" 2>"$WORK/err_q8.txt"
    check "q8_0 gguf: Engram blocks streamed, $k $split" same_file "$WORK/q8_mapped.npy" "$WORK/g.npy"
  done
done
check "q8_0 gguf: the Engram store read rows" grep -q "Engram store: [1-9][0-9]* row lookups" \
  "$WORK/err_q8.txt"
check "q8_0 gguf plan: the Engram tables in the file" "$PY" -c "
import json, sys
p = json.load(open(sys.argv[1]))
sys.exit(0 if p['engram_tables'] > 0 else 1)" <("$CEDAR_BIN" inspect -m "$WORK/q8.gguf" --plan --json)

# a memory cgroup of 40% of the checkpoint (cgroup v1 or v2, where this user may make one)
ck_bytes=$(du -b "$M/model.safetensors" | cut -f1)
limit=$((ck_bytes * 2 / 5))
cg=""
for base in /sys/fs/cgroup/memory /sys/fs/cgroup; do
  if [ -w "$base" ] && mkdir "$base/cedar-test-$$" 2>/dev/null; then cg="$base/cedar-test-$$"; break; fi
done
if [ -n "$cg" ]; then
  if [ -e "$cg/memory.limit_in_bytes" ]; then echo "$limit" >"$cg/memory.limit_in_bytes"
  else echo "$limit" >"$cg/memory.max"; fi
  sync && echo 1 >/proc/sys/vm/drop_caches 2>/dev/null || true
  set +e
  bash -c "echo \$\$ >'$cg/cgroup.procs' && exec '$CEDAR_BIN' run -m '$M' --raw -p '$P' -n 24 \
    --temp 0 -c 2048 --mem-budget $budget" >"$WORK/run_cg.txt" 2>"$WORK/cg_err.txt"
  rc=$?
  set -e
  rmdir "$cg" 2>/dev/null || true
  check "in a ${limit}-byte cgroup: exit 0 (got $rc)" test "$rc" -eq 0
  check "in a ${limit}-byte cgroup: same greedy text" same_file "$WORK/run_mapped.txt" \
    "$WORK/run_cg.txt"
else
  echo "  (no memory cgroup can be made here: the cgroup run is not tested)"
fi
finish
