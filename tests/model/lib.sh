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

finish() {
  echo "$PASSES passed, $FAILS failed"
  [ "$FAILS" -eq 0 ]
}
