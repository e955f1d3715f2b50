# Shared helpers for the model tests (sourced). Needs CEDAR_BIN and CEDAR_SOURCE_DIR (set by ctest).
set -euo pipefail
: "${CEDAR_BIN:?CEDAR_BIN must point at the cedar binary}"
: "${CEDAR_SOURCE_DIR:?CEDAR_SOURCE_DIR must point at the source tree}"
PY=/usr/bin/python3
REF="$CEDAR_SOURCE_DIR/tools/reference/logits.py"
CMP="$CEDAR_SOURCE_DIR/tests/model/compare_logits.py"
WORK=$(mktemp -d /tmp/cedar-model-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
FAILS=0
PASSES=0

# make_ids SEED N FILE: N pseudo-random token ids (mostly ordinary BPE ids, some special ids).
make_ids() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import sys
import numpy as np
seed, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(1000 + seed)
ids = rng.integers(0, 128000, size=n)
# a few repeated n-grams so Engram hashes collide the way real text does
if n > 40:
    ids[20:30] = ids[0:10]
np.savetxt(path, ids[None, :], fmt="%d", delimiter=",")
PYEOF
}

# head_ids FILE N OUT: the first N ids of FILE.
head_ids() {
  "$PY" -c "import sys; ids=open(sys.argv[1]).read().strip().split(','); open(sys.argv[3],'w').write(','.join(ids[:int(sys.argv[2])]))" "$1" "$2" "$3"
}

check() {  # check LABEL CMD...: run a comparison, count the result
  local label=$1
  shift
  if "$@"; then PASSES=$((PASSES + 1)); else FAILS=$((FAILS + 1)); echo "  ^ failed: $label"; fi
}

# refuses PATTERN CMD...: the command exits non-zero with PATTERN on stderr (a clean refusal)
refuses() {
  local pat=$1
  shift
  if "$@" >/dev/null 2>"$WORK/err"; then return 1; fi
  grep -q "$pat" "$WORK/err" || { cat "$WORK/err"; return 1; }
}

# same_logits MODEL_A MODEL_B IDS_FILE: both models' logits bit for bit, one-shot, chunked and
# token by token, in reference mode and with the best table of this CPU
same_logits() {
  local kern mode
  for kern in ref auto; do
    for mode in "" "--chunk 37" "--decode"; do
      # shellcheck disable=SC2086
      "$CEDAR_BIN" logits -m "$1" --ids-file "$3" --out "$WORK/same_a.npy" --kernels $kern $mode 2>/dev/null
      # shellcheck disable=SC2086
      "$CEDAR_BIN" logits -m "$2" --ids-file "$3" --out "$WORK/same_b.npy" --kernels $kern $mode 2>/dev/null
      check "logits $kern $mode" cmp -s "$WORK/same_a.npy" "$WORK/same_b.npy"
    done
  done
}

# invariant_logits MODEL IDS_FILE LABEL: one model's chunked and token-by-token logits equal its
# one-shot logits bit for bit, in reference mode and with the best table of this CPU
invariant_logits() {
  local kern mode
  for kern in ref auto; do
    "$CEDAR_BIN" logits -m "$1" --ids-file "$2" --out "$WORK/inv_o.npy" --kernels $kern 2>/dev/null
    for mode in "--chunk 37" "--decode"; do
      # shellcheck disable=SC2086
      "$CEDAR_BIN" logits -m "$1" --ids-file "$2" --out "$WORK/inv_c.npy" --kernels $kern $mode 2>/dev/null
      check "$3: $kern $mode = one-shot" cmp -s "$WORK/inv_o.npy" "$WORK/inv_c.npy"
    done
  done
}

finish() {
  echo "$PASSES passed, $FAILS failed"
  [ "$FAILS" -eq 0 ]
}
