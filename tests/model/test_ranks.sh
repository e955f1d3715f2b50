#!/usr/bin/env bash
# Pipeline stages over MPI (docs/DISTRIBUTED.md): ranks on loopback through Open MPI's TCP
# transport. In reference mode the logits of 2 and 4 ranks equal the one-process logits bit for
# bit -- exact one-shot, chunked and decode, CED prompts in open chunks, batches mixing them --
# for cuts at a KV-source boundary (2, 4), inside a source's range (3) and between the candidate
# source and the Reindex layer (5); ranks holding different checkpoints refuse to start; a rank
# that dies or stops answering is reported by the rank waiting for it, and the server stays up.
source "$(dirname "$0")/lib.sh"
: "${CEDAR_RANKS_PARITY:?CEDAR_RANKS_PARITY must point at cedar_ranks_parity}"
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# loopback sockets only (a host's other interfaces may not route between its own processes)
MPI=(mpirun --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
M="$WORK/tiny"
"$CEDAR_BIN" make-model --preset tiny --seed 7 --out "$M" >/dev/null
"$CEDAR_BIN" make-model --preset tiny --seed 8 --out "$WORK/other" >/dev/null
make_ids 7 200 "$WORK/ids.txt"

# the parity driver: every scenario on the split model against one process, call for call
for cuts in 3 5; do
  check "2 ranks, cut $cuts" "${MPI[@]}" -np 2 "$CEDAR_RANKS_PARITY" "$M" "$cuts"
done
check "4 ranks, cuts 2,4,5" "${MPI[@]}" -np 4 "$CEDAR_RANKS_PARITY" "$M" 2,4,5

# the command line: cedar logits --ranks (automatic and given cuts) = one process
"$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids.txt" --kernels ref --out "$WORK/one.npy" 2>/dev/null
for mode in "" "--chunk 37" "--decode"; do
  # shellcheck disable=SC2086
  "${MPI[@]}" -np 2 "$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids.txt" --kernels ref \
    --out "$WORK/two.npy" --ranks --stage-cuts 2 $mode 2>"$WORK/log"
  check "logits --ranks --stage-cuts 2 $mode" cmp -s "$WORK/one.npy" "$WORK/two.npy"
done
grep -q "cut 2 (rank 0 -> 1): 10[0-9][0-9] bytes/token in 200 messages" "$WORK/log" ||
  { cat "$WORK/log"; FAILS=$((FAILS + 1)); echo "  ^ failed: traffic line"; }
"${MPI[@]}" -np 3 "$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/ids.txt" --kernels ref \
  --out "$WORK/three.npy" --ranks 2>/dev/null
check "logits --ranks, 3 ranks, automatic cuts" cmp -s "$WORK/one.npy" "$WORK/three.npy"

# cedar bench --ranks: batched decode over two stages reports what each boundary carried
"${MPI[@]}" -np 2 "$CEDAR_BIN" bench -m "$M" --prompt 32 --gen 4 --reps 1 --batch 1,2 \
  --plans ced --bw-mib 16 --probe-passes 1 --json --ranks --stage-cuts 4 >"$WORK/bench.json" \
  2>"$WORK/bench.err" || cat "$WORK/bench.err"
check "bench --ranks" "$PY" - "$WORK/bench.json" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["ranks"]["count"] == 2 and j["ranks"]["layers"] == "0-3|4-6", j["ranks"]
for b in j["batched_decode"]:
    hops = b["rank_traffic"]
    assert [(h["from_rank"], h["to_rank"]) for h in hops] == [(0, 1), (1, 0)], hops
    # the stream of a decoded token at tiny's width: 4 copies x 128 bf16 + 4 fp32, plus framing
    assert 1040 <= hops[0]["bytes_per_token"] < 1200, hops
    # one micro-batch per rank in flight: a pass of 2 sequences sends two messages per boundary
    assert hops[0]["messages"] == 4 * min(b["batch"], 2), hops
    assert b["tokens_per_s"] > 0
PYEOF

# cedar run --ranks: the same greedy text as one process
RUN=(run -m "$M" --raw -p "The ranks of a pipeline" -n 12 --temp 0 --kernels ref)
"$CEDAR_BIN" "${RUN[@]}" >"$WORK/run1.txt" 2>/dev/null
"${MPI[@]}" -np 2 "$CEDAR_BIN" "${RUN[@]}" --ranks --stage-cuts 5 >"$WORK/run2.txt" 2>/dev/null
check "run --ranks = one process" cmp "$WORK/run1.txt" "$WORK/run2.txt"
check "run --ranks printed text" test -s "$WORK/run2.txt"

# cedar serve --ranks: rank 0 answers HTTP; greedy answers equal one process's, alone and two at
# once (one batched pass of two sequences = two micro-batches in flight)
wait_port() {  # wait_port LOG: the port of a server once it listens
  local p
  for _ in $(seq 600); do
    p=$(grep -o "listening on http://127.0.0.1:[0-9]*" "$1" 2>/dev/null | grep -o "[0-9]*$" || true)
    if [ -n "$p" ]; then echo "$p"; return 0; fi
    sleep 0.1
  done
  cat "$1" >&2
  return 1
}
ask() {  # ask PORT WORD: a greedy chat completion's content (or the error body)
  curl -s -m 60 "http://127.0.0.1:$1/v1/chat/completions" -H 'content-type: application/json' \
    -d '{"model":"m","messages":[{"role":"user","content":"Say '"$2"'"}],"max_tokens":12,"temperature":0}'
}
answers() {  # answers PORT OUT: one request alone, then two at once
  ask "$1" hello >"$2.a"
  ask "$1" yes >"$2.b" &
  local other=$!
  ask "$1" no >"$2.c"
  wait "$other"
  cat "$2.a" "$2.b" "$2.c" | "$PY" -c '
import json, sys
for line in sys.stdin.read().replace("}{", "}\n{").splitlines():
    print(json.loads(line)["choices"][0]["message"]["content"])' >"$2"
}
SERVE=(serve -m "$M" --port 0 --kernels ref --parallel 2)
"$CEDAR_BIN" "${SERVE[@]}" --no-cache >"$WORK/s1.log" 2>&1 &
s1=$!
answers "$(wait_port "$WORK/s1.log")" "$WORK/one.txt"
kill -TERM "$s1"; wait "$s1" || true
# --mca orte_enable_recovery 1: mpirun keeps the job when a rank dies (docs/DISTRIBUTED.md)
# (no --no-cache: under --ranks the prefix cache is off by itself)
"${MPI[@]}" --mca orte_enable_recovery 1 -np 2 "$CEDAR_BIN" "${SERVE[@]}" --ranks \
  --stage-cuts 3 --rank-timeout 3 >"$WORK/s2.log" 2>&1 &
s2=$!
P2=$(wait_port "$WORK/s2.log")
answers "$P2" "$WORK/two.txt"
check "serve --ranks answers = one process" cmp "$WORK/one.txt" "$WORK/two.txt"
check "serve --ranks logs the split" grep -q "2 ranks, layers 0-2|3-6" "$WORK/s2.log"
check "serve --ranks: prefix cache off" grep -q "prefix cache off)" "$WORK/s2.log"
# a rank that dies (SIGKILL): the request fails naming it, the server stays up and says so
for p in $(pgrep -f "serve -m $M" || true); do
  tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && kill -KILL "$p"
done
check "a killed rank fails the request" grep -q "rank 1 .*within 3 s (it died or hangs)" \
  <(ask "$P2" hello)
check "later requests fail too" grep -q "pipeline stages" <(ask "$P2" again)
check "/health reports it" grep -q '"status":"error"' <(curl -s -m 10 "http://127.0.0.1:$P2/health")
kill -TERM "$s2" 2>/dev/null || true
check "the job ends on SIGTERM" timeout 30 tail --pid="$s2" -f /dev/null

# real sockets: rank 1 in its own network namespace, the ranks talking over a veth pair (Open
# MPI's TCP transport, and PMIx's, on the pair's subnet). Needs root (CAP_NET_ADMIN); skipped
# where namespaces cannot be made.
NS="cedar-ranks-$$" VA="cra$$" VB="crb$$" NET="10.213.$(($$ % 250)).0"
veth_down() { ip netns del "$NS" 2>/dev/null || true; ip link del "$VA" 2>/dev/null || true; }
if ip netns add "$NS" 2>/dev/null; then
  trap veth_down EXIT
  ip link add "$VA" type veth peer name "$VB" && ip link set "$VB" netns "$NS" &&
    ip addr add "${NET%.0}.1/24" dev "$VA" && ip link set "$VA" up &&
    ip netns exec "$NS" ip addr add "${NET%.0}.2/24" dev "$VB" &&
    ip netns exec "$NS" ip link set "$VB" up && ip netns exec "$NS" ip link set lo up
  sent0=$(cat "/sys/class/net/$VA/statistics/tx_bytes")
  LOGITS=(logits -m "$M" --ids-file "$WORK/ids.txt" --kernels ref --out "$WORK/veth.npy" --ranks
    --stage-cuts 3 --rank-timeout 60)
  PMIX_MCA_ptl_tcp_if_include="$NET/24" PMIX_MCA_ptl_tcp_remote_connections=1 \
    mpirun --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include "$NET/24" \
    --mca oob_tcp_if_include "$NET/24" -np 1 "$CEDAR_BIN" "${LOGITS[@]}" : \
    -np 1 ip netns exec "$NS" "$CEDAR_BIN" "${LOGITS[@]}" >"$WORK/veth.log" 2>&1 ||
    cat "$WORK/veth.log"
  check "2 ranks over a veth pair = one process" cmp -s "$WORK/one.npy" "$WORK/veth.npy"
  # the hop of 200 tokens at tiny's width (~1 KB each) went through the pair
  check "the hops crossed the veth pair" test \
    $(($(cat "/sys/class/net/$VA/statistics/tx_bytes") - sent0)) -gt 200000
  veth_down
else
  echo "skipped: no network namespaces here (the veth check needs root)"
fi

# refusals: different checkpoints on the ranks, cuts that do not fit
check "different checkpoints refuse" refuses "different checkpoints" "${MPI[@]}" \
  -np 1 "$CEDAR_BIN" logits -m "$M" --ids 1,2,3 --out "$WORK/x.npy" --ranks : \
  -np 1 "$CEDAR_BIN" logits -m "$WORK/other" --ids 1,2,3 --out "$WORK/x.npy" --ranks
check "different kernels refuse" refuses "different checkpoints, kernels" "${MPI[@]}" \
  -np 1 "$CEDAR_BIN" logits -m "$M" --ids 1,2,3 --out "$WORK/x.npy" --ranks --kernels ref : \
  -np 1 "$CEDAR_BIN" logits -m "$M" --ids 1,2,3 --out "$WORK/x.npy" --ranks --kernels auto
check "cuts for another rank count refuse" refuses "2 ranks need 1" "${MPI[@]}" -np 2 \
  "$CEDAR_BIN" logits -m "$M" --ids 1,2,3 --out "$WORK/x.npy" --ranks --stage-cuts 2,4
check "serve --ranks --cache-ram refuses" refuses "need one process" "${MPI[@]}" -np 2 \
  "$CEDAR_BIN" serve -m "$M" --port 0 --ranks --cache-ram 64
check "--mem-budget with --ranks refuses" refuses "do not work with --ranks" "${MPI[@]}" -np 2 \
  "$CEDAR_BIN" run -m "$M" -p hi -n 1 --ranks --mem-budget 4G
check "--stage-cuts without --ranks refuses" refuses "need --ranks" \
  "$CEDAR_BIN" logits -m "$M" --ids 1,2,3 --out "$WORK/x.npy" --stage-cuts 2

# a rank that stops answering (SIGSTOP: hung) is reported by the rank waiting for it, which
# ends with the error instead of waiting forever
make_ids 8 2000 "$WORK/long.txt"
( if "${MPI[@]}" -np 2 "$CEDAR_BIN" logits -m "$M" --ids-file "$WORK/long.txt" --kernels ref \
    --out "$WORK/hang.npy" --ranks --stage-cuts 3 --decode --rank-timeout 3 >"$WORK/hang.log" 2>&1
  then echo "rc=0" >>"$WORK/hang.log"; else echo "rc=$?" >>"$WORK/hang.log"; fi ) &
runner=$!
stopped=""
for _ in $(seq 300); do
  # once the ranks are under way (rank 0 logs the split after the start-up check)
  grep -q "2 ranks, layers" "$WORK/hang.log" 2>/dev/null || { sleep 0.1; continue; }
  for p in $(pgrep -f "out $WORK/hang.npy" || true); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
      kill -STOP "$p" && stopped=$p
    fi
  done
  [ -n "$stopped" ] && break
  sleep 0.1
done
wait "$runner" || true
[ -n "$stopped" ] && kill -KILL "$stopped" 2>/dev/null || true
check "a hung rank is reported" grep -q "no answer from rank 1 within 3 s" "$WORK/hang.log"
check "the command fails" grep -q "rc=[1-9]" "$WORK/hang.log"
finish
