#!/usr/bin/env bash
# The training corpus collector (tools/train/corpus.py) on the sources the suite's install step
# provides (bible-kjv-text, fortunes, Python's standard library): every document non-empty,
# every 20th of each source held out, and the output deterministic.
source "$(dirname "$0")/lib.sh"
C="$CEDAR_SOURCE_DIR/tools/train/corpus.py"
"$PY" "$C" --sources bible,fortunes,python --require-all --out "$WORK/a.jsonl"
"$PY" "$C" --sources bible,fortunes,python --require-all --out "$WORK/b.jsonl"
check "deterministic" cmp -s "$WORK/a.jsonl" "$WORK/b.jsonl"
check "documents and splits" "$PY" - "$WORK/a.jsonl" <<'PYEOF'
import json, sys
per = {}
for line in open(sys.argv[1], encoding="utf-8"):
    d = json.loads(line)
    assert d["text"].strip(), d
    assert d["split"] == ("heldout" if d["doc"] % 20 == 19 else "train"), d
    per.setdefault(d["source"], []).append(d)
assert set(per) == {"bible", "fortunes", "python"}, per.keys()
assert len(per["bible"]) == 1189, len(per["bible"])  # the chapters of the KJV
assert per["bible"][0]["text"].startswith("In the beginning God created"), per["bible"][0]
for name, docs in per.items():
    held = sum(d["split"] == "heldout" for d in docs)
    assert held == len(docs) // 20, (name, held, len(docs))
    print(f"{name}: {len(docs)} documents, {held} held out")
PYEOF
finish
