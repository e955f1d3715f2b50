#!/usr/bin/env bash
# The trainer end to end in seconds (tools/train/): a few KB of corpus and a few synthetic
# conversations tokenized by cedar itself, 8 steps through every phase (dense indexer warm-up,
# sparse Top-K, CED simulation, candidate pool, QAT), then export. The exported checkpoint must
# load in cedar, be bit-identical between cedar's reference mode and tools/reference (as any
# checkpoint), compute what the trainer computes (tools/train/check_export.py), and the compact
# form (models/default/ layout) must expand to exactly the same tensors. A second run resumes.
# Then the DSpark drafter (train_dspark.py) on the trained target: a few steps, exported with it,
# computing what the trainer computes, its compact form expanding to the same tensors, and
# speculative decoding with it printing what plain decoding prints.
source "$(dirname "$0")/lib.sh"
T="$CEDAR_SOURCE_DIR/tools/train"
export CEDAR_TRAIN_BLAS_CHOSEN=1  # keep the machine's OpenBLAS default in the suite
"$CEDAR_BIN" make-model --preset tiny --seed 1 --out "$WORK/tpl" >/dev/null
"$PY" "$T/corpus.py" --sources bible,fortunes --require-all --out "$WORK/all.jsonl"
# 40 documents (train and held-out ones) are a few KB
"$PY" - "$WORK/all.jsonl" "$WORK/corpus.jsonl" <<'PYEOF'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
keep = [d for d in docs if d["source"] == "fortunes"][:38] + [docs[0], docs[19]]
open(sys.argv[2], "w", encoding="utf-8").writelines(json.dumps(d) + "\n" for d in keep)
PYEOF
"$PY" "$T/synth.py" --count 40 --seed 2 --out "$WORK/synth.jsonl"
"$PY" "$T/data.py" --cedar "$CEDAR_BIN" --tokenizer "$WORK/tpl/tokenizer.json" \
  --corpus "$WORK/corpus.jsonl" --synth "$WORK/synth.jsonl" --out "$WORK/data" --max-used 2000 \
  >"$WORK/data.log"
check "data: used ids and held-out text" "$PY" - "$WORK/data" <<'PYEOF'
import json, os, sys
import numpy as np
d = sys.argv[1]
meta = json.load(open(os.path.join(d, "meta.json")))
used = np.load(os.path.join(d, "used_ids.npy"))
assert len(used) == meta["used_ids"] and 0 < len(used) <= 2000 + 34, meta
assert np.all(np.diff(used) > 0) and 128804 in used and 0 in used
m = np.load(os.path.join(d, "synth_train_mask.npy"))
ids = np.load(os.path.join(d, "synth_train.npy"))
assert 0 < m.sum() < len(m) and ids[m.astype(bool)].tolist().count(1) > 0  # EOS is scored
assert os.path.getsize(os.path.join(d, "heldout", "bible.txt")) > 0
PYEOF
train() {
  "$PY" "$T/train.py" --template "$WORK/tpl" --data "$WORK/data" --out "$WORK/run" --steps "$1" \
    --batch 2 --seq 256 --threads 2 --eval-every 4 --save-every 4 --warmup 2
}
train 8 >"$WORK/train.log" 2>&1 || { cat "$WORK/train.log"; exit 1; }
check "every phase ran" "$PY" - "$WORK/run/log.jsonl" <<'PYEOF'
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 8, len(recs)
assert recs[0]["dense"] and not recs[-1]["dense"] and recs[-1]["qat"], recs
assert all(math.isfinite(r["ce"]) and math.isfinite(r["kl"]) for r in recs), recs
assert recs[-1]["ce"] < recs[0]["ce"], (recs[0]["ce"], recs[-1]["ce"])
PYEOF
train 10 >"$WORK/train2.log" 2>&1 || { cat "$WORK/train2.log"; exit 1; }
check "resumes" grep -q "resumed at step 8" "$WORK/train2.log"
"$PY" "$T/export.py" --template "$WORK/tpl" --state "$WORK/run/state.pt" --out "$WORK/m" >/dev/null
"$CEDAR_BIN" inspect --model "$WORK/m" >/dev/null
make_ids 5 160 "$WORK/ids.txt"
"$PY" "$REF" --model "$WORK/m" --ids-file "$WORK/ids.txt" --out "$WORK/ref.npy"
"$CEDAR_BIN" logits --model "$WORK/m" --ids-file "$WORK/ids.txt" --kernels ref --out "$WORK/c.npy"
check "ref mode == tools/reference" "$PY" "$CMP" "$WORK/c.npy" "$WORK/ref.npy" \
  --label "trained tiny T=160" --tolerate-rare
check "trainer == engine" "$PY" "$T/check_export.py" --template "$WORK/tpl" --data "$WORK/data" \
  --state "$WORK/run/state.pt" --model "$WORK/m" --cedar "$CEDAR_BIN" --tokens 200 \
  --max-rel 0.1 --min-agree 0.5
"$PY" "$T/export.py" --template "$WORK/tpl" --state "$WORK/run/state.pt" --out "$WORK/compact" \
  --compact >/dev/null
"$CEDAR_BIN" expand-model --compact "$WORK/compact" --tokenizer "$WORK/tpl/tokenizer.json" \
  --out "$WORK/expanded" >/dev/null
same_tensors() {
  "$PY" - "$1" "$2" "$CEDAR_SOURCE_DIR/tools/reference" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[3])
import numpy as np
from checkpoint import Checkpoint
a, b = Checkpoint(sys.argv[1]), Checkpoint(sys.argv[2])
assert set(a.where) == set(b.where)
bad = [n for n in a.where if not np.array_equal(a._get(n), b._get(n))]
assert not bad, bad[:5]
PYEOF
}
check "compact expands to the export" same_tensors "$WORK/expanded" "$WORK/m"
# the way back in: the compact model loaded into the trainer and exported again is unchanged
reexport() {  # reexport SRC DST [mtp]: SRC (compact) into the trainer (and its drafter), out as DST
  "$PY" - "$T" "$WORK" "$1" "$2" "${3:-}" <<'PYEOF'
import os, sys
sys.path.insert(0, sys.argv[1])
os.environ["CEDAR_TRAIN_BLAS_CHOSEN"] = "1"
import train, export, load_compact
from torch_dspark import DSpark
w, src, dst = sys.argv[2:5]
args, model, _ = train.build(os.path.join(w, "tpl"), os.path.join(w, "data"))
load_compact.load_into(model, src)
state = model.state_dict()
if sys.argv[5] == "mtp":
    drafter = DSpark(args, len(model.used_ids) + 1)
    load_compact.load_drafter(drafter, src, model.used_ids.numpy())
    state = {**state, **drafter.state_dict()}
os.makedirs(dst)
export.export_compact(os.path.join(w, "tpl"), state, dst)
PYEOF
}
reexport "$WORK/compact" "$WORK/compact2"
same_values() {  # same_values A B [mtp]: two compact models hold the same values (and mtp.*)
  "$PY" - "$1" "$2" "$T" "${3:-}" <<'PYEOF'
# values, not codes: a block whose largest code is 224 may come back as 448 at half the scale
import os, sys
sys.path.insert(0, sys.argv[3])
import numpy as np
import load_compact as L
a = L.open_compact(sys.argv[1])
b = L.open_compact(sys.argv[2])
assert a.names() == b.names()
assert sys.argv[4] != "mtp" or any(n.startswith("mtp.") for n in a.names())
bad = [n for n in a.names() if not np.array_equal(L.value(a, n), L.value(b, n))]
assert not bad, bad[:5]
PYEOF
}
check "compact -> trainer -> compact keeps every value" same_values "$WORK/compact" "$WORK/compact2"
# the drafter, trained with the target frozen (the compact model above as the target), half of
# its rows the target's own greedy continuations (distill_data.py through cedar serve). Prompts
# from the training bible chapter: a slice of a short fortune is a whole document, which an
# 8-step model rightly ends at once, and six empty continuations leave no held-out rows
"$PY" - "$WORK/corpus.jsonl" "$WORK/distill_corpus.jsonl" <<'PYEOF'
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
keep = [d for d in docs if d["source"] == "bible" and d["split"] == "train"]
assert keep, "no training bible chapter in the smoke corpus"
open(sys.argv[2], "w", encoding="utf-8").writelines(json.dumps(d) + "\n" for d in keep)
PYEOF
"$PY" "$T/distill_data.py" --cedar "$CEDAR_BIN" --model "$WORK/m" --corpus "$WORK/distill_corpus.jsonl" \
  --out "$WORK/data" --count 6 --gen 32 --parallel 2 2>"$WORK/distill.log" \
  || { cat "$WORK/distill.log"; exit 1; }
check "distill data: BOS-started sequences, continuations marked" "$PY" - "$WORK/data" <<'PYEOF'
import os, sys
import numpy as np
d = sys.argv[1]
ids, gen, starts = (np.load(os.path.join(d, f"distill_train{n}.npy")) for n in ("", "_gen", "_starts"))
assert len(starts) == 6 and len(ids) == len(gen) and (ids[starts] == 0).all(), (starts, len(ids))
assert 0 < gen.sum() < len(gen) and not gen[starts].any()
PYEOF
"$PY" "$T/train_dspark.py" --template "$WORK/tpl" --data "$WORK/data" --init "$WORK/compact" \
  --out "$WORK/ds" --steps 4 --batch 2 --seq 32 --anchors 16 --threads 2 --eval-every 4 \
  --save-every 2 --warmup 1 --distill-share 0.5 >"$WORK/ds.log" 2>&1 \
  || { cat "$WORK/ds.log"; exit 1; }
check "drafter: trains, QAT at the end, held-out agreement" "$PY" - "$WORK/ds/log.jsonl" <<'PYEOF'
import json, math, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 4 and not recs[0]["qat"] and recs[-1]["qat"], recs
assert all(math.isfinite(r["loss"]) for r in recs) and recs[-1]["loss"] < recs[0]["loss"], recs
assert len(recs[-1]["heldout_agree"]) == 5 and recs[-1]["heldout_tokens_per_pass"] >= 1, recs[-1]
PYEOF
"$PY" "$T/export.py" --template "$WORK/tpl" --state "$WORK/ds/state.pt" --out "$WORK/md" >/dev/null
check "drafter: trainer == engine (target and one draft cycle)" "$PY" "$T/check_export.py" \
  --template "$WORK/tpl" --data "$WORK/data" --state "$WORK/ds/state.pt" --model "$WORK/md" \
  --cedar "$CEDAR_BIN" --tokens 200 --max-rel 0.1 --min-agree 0.5
"$PY" "$T/export.py" --template "$WORK/tpl" --state "$WORK/ds/state.pt" --out "$WORK/mdc" \
  --compact >/dev/null
"$CEDAR_BIN" expand-model --compact "$WORK/mdc" --tokenizer "$WORK/tpl/tokenizer.json" \
  --out "$WORK/mdx" >/dev/null
check "drafter: compact (Markov tables as rows) expands to the export" same_tensors "$WORK/mdx" "$WORK/md"
# the drafter's way back in (train_dspark.py --init-drafter): target and drafter loaded from the
# compact model and exported again keep every value
reexport "$WORK/mdc" "$WORK/mdc2" mtp
check "drafter: compact -> trainer -> compact keeps every value" \
  same_values "$WORK/mdc" "$WORK/mdc2" mtp
for spec in off dspark; do
  "$CEDAR_BIN" run -m "$WORK/md" --raw -p "The Lord said" -n 24 --temp 0 --speculative "$spec" \
    >"$WORK/run-$spec.txt"
done
check "drafter: speculation prints what plain decoding prints" cmp "$WORK/run-off.txt" "$WORK/run-dspark.txt"
finish
