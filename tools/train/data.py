#!/usr/bin/python3
"""Tokenized training data for the default model: corpus.py documents and synth.py conversations,
turned into token ids by the engine itself (`cedar tokenize --jsonl`, `cedar render --ids
--jsonl`), so training sees exactly the ids cedar will.

    /usr/bin/python3 tools/train/data.py --cedar build/cedar --tokenizer T.json \
        --corpus corpus.jsonl --synth synth.jsonl --out DATA_DIR

DATA_DIR gets:
  corpus_train.npy, corpus_heldout.npy   int32 token streams, documents separated by EOS (1)
  synth_train.npy, synth_heldout.npy     int32 packed conversations (each starts with BOS)
  synth_train_mask.npy, ...              uint8, 1 where the token is part of an assistant turn
                                         (after <｜Assistant｜> up to its <｜end▁of▁sentence｜>)
  synth_*_starts.npy                     int64 offset of each conversation
  heldout/<source>.txt                   the held-out documents as text (for `cedar perplexity`)
  heldout/synth.jsonl                    the held-out conversations (requests, for tool-call eval)
  used_ids.npy                           the sorted ids of the reduced head: the --max-used most
                                         frequent training ids and the template's specials
  meta.json                              counts
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

BOS, EOS = 0, 1
VOCAB = 129280
ASSISTANT = 128804  # <｜Assistant｜>
ALWAYS_USED = [0, 1, 2] + list(range(128799, 128830))  # specials and template tokens


def run_jsonl(cmd, lines):
    """Feed JSON lines to a cedar batch command, return one parsed output per line."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for v in lines:
            f.write(json.dumps(v, ensure_ascii=False) + "\n")
        path = f.name
    try:
        out = subprocess.run(cmd + [path], capture_output=True, check=False)
    finally:
        os.unlink(path)
    if out.returncode != 0:
        sys.exit(f"data.py: {' '.join(cmd)} failed: {out.stderr.decode(errors='replace')}")
    res = [json.loads(l) for l in out.stdout.decode("utf-8").splitlines()]
    if len(res) != len(lines):
        sys.exit(f"data.py: {cmd[0]} returned {len(res)} lines for {len(lines)} inputs")
    return res


def assistant_mask(ids):
    """1 on the tokens of every assistant turn: after <｜Assistant｜> through its EOS."""
    m = np.zeros(len(ids), dtype=np.uint8)
    on = False
    for i, t in enumerate(ids):
        if on:
            m[i] = 1
            if t == EOS:
                on = False
        elif t == ASSISTANT:
            on = True
    return m


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(l) for l in f if l.strip()]


def build_corpus(args, out):
    docs = read_jsonl(args.corpus)
    ids = run_jsonl([args.cedar, "tokenize", "--tokenizer", args.tokenizer, "--jsonl"],
                    [{"text": d["text"]} for d in docs])
    streams = {"train": [], "heldout": []}
    os.makedirs(os.path.join(out, "heldout"), exist_ok=True)
    texts = {}
    for d, t in zip(docs, ids):
        streams[d["split"]].append(np.asarray(t + [EOS], dtype=np.int32))
        if d["split"] == "heldout":
            texts.setdefault(d["source"], []).append(d["text"])
    for split, parts in streams.items():
        a = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        np.save(os.path.join(out, f"corpus_{split}.npy"), a)
    for source, t in texts.items():
        with open(os.path.join(out, "heldout", f"{source}.txt"), "w", encoding="utf-8") as f:
            f.write("\n\n".join(t) + "\n")
    return {s: int(sum(len(p) for p in parts)) for s, parts in streams.items()}


def build_synth(args, out):
    convs = read_jsonl(args.synth)
    ids = run_jsonl([args.cedar, "render", "--ids", "--tokenizer", args.tokenizer, "--jsonl"],
                    [c["request"] for c in convs])
    counts = {}
    for split in ("train", "heldout"):
        sel = [i for i, c in enumerate(convs) if c["split"] == split]
        parts = [np.asarray(ids[i], dtype=np.int32) for i in sel]
        starts = np.cumsum([0] + [len(p) for p in parts[:-1]]).astype(np.int64)
        a = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        m = np.concatenate([assistant_mask(p) for p in parts]) if parts else np.zeros(0, np.uint8)
        np.save(os.path.join(out, f"synth_{split}.npy"), a)
        np.save(os.path.join(out, f"synth_{split}_mask.npy"), m)
        np.save(os.path.join(out, f"synth_{split}_starts.npy"), starts)
        counts[split] = int(len(a))
    with open(os.path.join(out, "heldout", "synth.jsonl"), "w", encoding="utf-8") as f:
        for c in convs:
            if c["split"] == "heldout":
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cedar", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--synth", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-used", type=int, default=38000,
                    help="ids kept in the reduced head (the rest share the 'other' row)")
    args = ap.parse_args()
    os.makedirs(os.path.join(args.out, "heldout"), exist_ok=True)
    meta = {"corpus_tokens": build_corpus(args, args.out), "synth_tokens": build_synth(args, args.out)}
    counts = sum(np.bincount(np.load(os.path.join(args.out, f"{n}.npy")), minlength=VOCAB)
                 for n in ("corpus_train", "synth_train"))
    # the reduced head keeps the most frequent ids (the compact weights hold two rows per id)
    order = np.argsort(-counts, kind="stable")
    keep = [int(i) for i in order[: args.max_used] if counts[i] > 0]
    used = np.array(sorted(set(keep) | set(ALWAYS_USED)), dtype=np.int64)
    meta["used_coverage"] = float(counts[used].sum() / max(1, counts.sum()))
    np.save(os.path.join(args.out, "used_ids.npy"), used)
    meta["used_ids"] = int(len(used))
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
