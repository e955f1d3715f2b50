#!/usr/bin/python3
"""Self-distillation data for the DSpark drafter: the target's own greedy continuations.

    /usr/bin/python3 tools/train/distill_data.py --cedar build/cedar --model MODEL_DIR \
        --corpus corpus.jsonl --out DATA_DIR [--count 600] [--gen 192] [--parallel 8]

A drafter is judged on what the target generates, not on the corpus: a small model's greedy text
loops and copies far more than prose does, and a drafter that learned only corpus text predicts
its frequent words. This starts `cedar serve` on the model (any free port), sends `--count` raw
continuations (`/v1/completions`, temperature 0) of corpus slices from the training split, and
tokenizes prompt + continuation with `cedar tokenize` (the continuation's text re-tokenized:
nearly always the generated ids). Written into DATA_DIR (train_dspark.py --distill-share):
  distill_train.npy         int32 ids of every sequence, each starting with BOS, concatenated
  distill_train_starts.npy  int64 the start of each sequence
  distill_train_gen.npy     uint8 1 on the continuation's tokens (the drafter is scored there)
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402


def start_server(cedar, model, parallel, extra=()):
    """(process, port) of `cedar serve` on any free port, once /health says the model is loaded."""
    proc = subprocess.Popen([cedar, "serve", "-m", model, "--port", "0", "--parallel", str(parallel),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        m = re.search(r"https?://[0-9.]+:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    else:
        raise RuntimeError("cedar serve exited before listening")
    # keep reading its log: a full pipe would block the server's next log line, and it with it
    threading.Thread(target=lambda: proc.stdout.read(), daemon=True).start()
    while True:  # /health answers 503 while the model loads
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=60) as r:
                if json.load(r).get("status") == "ok":
                    return proc, port
        except urllib.error.HTTPError:
            pass
        time.sleep(0.2)


def complete(port, prompt, gen):
    body = json.dumps({"model": "default", "prompt": prompt, "max_tokens": gen,
                       "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)["choices"][0]["text"]


def tokenize(cedar, tokenizer, texts):
    return data.run_jsonl([cedar, "tokenize", "--tokenizer", tokenizer, "--jsonl"], texts)


def prompts(corpus, count, rng, chars):
    docs = [d["text"] for d in map(json.loads, open(corpus, encoding="utf-8"))
            if d["split"] == "train" and len(d["text"]) > 64]
    out = []
    for _ in range(count):
        t = docs[rng.integers(len(docs))]
        n = int(rng.integers(chars // 4, chars))
        s = int(rng.integers(0, max(1, len(t) - n)))
        out.append(t[s : s + n])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cedar", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--gen", type=int, default=192)
    ap.add_argument("--prompt-chars", type=int, default=800)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    texts = prompts(a.corpus, a.count, rng, a.prompt_chars)
    proc, port = start_server(a.cedar, a.model, a.parallel)
    try:
        with ThreadPoolExecutor(a.parallel) as ex:
            conts = list(ex.map(lambda t: complete(port, t, a.gen), texts))
    finally:
        proc.terminate()
        proc.wait()
    tok = os.path.join(a.model, "tokenizer.json")
    p_ids = tokenize(a.cedar, tok, texts)
    full = tokenize(a.cedar, tok, [t + c for t, c in zip(texts, conts)])
    ids, gen, starts = [], [], []
    for p, f in zip(p_ids, full):
        starts.append(len(ids))
        ids += [0] + f
        n_prompt = 1 + min(len(p), len(f))
        gen += [0] * n_prompt + [1] * (1 + len(f) - n_prompt)
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "distill_train.npy"), np.asarray(ids, dtype=np.int32))
    np.save(os.path.join(a.out, "distill_train_starts.npy"), np.asarray(starts, dtype=np.int64))
    np.save(os.path.join(a.out, "distill_train_gen.npy"), np.asarray(gen, dtype=np.uint8))
    print(f"distill_data: {len(starts)} sequences, {len(ids)} ids, {sum(gen)} generated",
          file=sys.stderr)


if __name__ == "__main__":
    main()
