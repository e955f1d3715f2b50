#!/usr/bin/python3
"""Speculative decoding on a trained model with its drafter: acceptance and speed at B=1 and B=8
(the measurements of docs/SPECULATIVE.md).

    /usr/bin/python3 tools/train/spec_measure.py --cedar build/cedar --model MODEL_DIR \
        --heldout DATA_DIR/heldout [--gen 128] [--threads 2]

B=1: `cedar bench --json` on the continuation of three held-out texts, with the payoff gate off
(`--spec-always`: the drafter's acceptance and a pass's cost) and on (what a user gets).
B=8: `cedar serve --parallel 8`, eight concurrent greedy `/v1/completions` of --gen tokens,
plain, always-speculative and gated: completion tokens per wall second, and tokens per verify
pass from /metrics. Every figure is from this run on this machine: compare within it only.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import distill_data  # noqa: E402

SOURCES = ("bible", "python", "wordnet")


def bench(a, prompt_file, extra):
    out = subprocess.run([a.cedar, "bench", "-m", a.model, "--prompt", "256", "--gen", str(a.gen),
                          "--reps", "1", "--batch", "0", "--plans", "ced", "--json",
                          "--prompt-file", prompt_file, "-t", str(a.threads)] + extra,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["speculative"]


def serve_batch(a, prompts, extra):
    proc, port = distill_data.start_server(a.cedar, a.model, 8, ["-t", str(a.threads)] + extra)
    try:
        def one(p):
            body = json.dumps({"model": "m", "prompt": p, "max_tokens": a.gen,
                               "temperature": 0}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=900) as r:
                j = json.load(r)
            return j["usage"]["completion_tokens"], j["choices"][0]["text"]

        t0 = time.time()
        with ThreadPoolExecutor(len(prompts)) as ex:
            res = list(ex.map(one, prompts))
        wall = time.time() - t0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
            metrics = r.read().decode()
    finally:
        proc.terminate()
        proc.wait()

    def counter(name):
        m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", metrics, re.M)
        return float(m.group(1)) if m else 0.0

    tokens = sum(n for n, _ in res)
    passes = counter("cedar_spec_verify_passes_total")
    accepted = counter("cedar_spec_accepted_tokens_total")
    return {"tokens": tokens, "wall_s": round(wall, 2), "tokens_per_s": round(tokens / wall, 1),
            "passes": int(passes), "tokens_per_pass": round(1 + accepted / passes, 3) if passes else None,
            "texts": [t for _, t in res]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cedar", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--heldout", required=True, help="data.py's heldout/ directory")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    files = [os.path.join(a.heldout, s + ".txt") for s in SOURCES]
    print("B=1 (cedar bench, greedy, 256-token prompt window of each held-out text)")
    for f in files:
        for label, extra in (("always", ["--spec-always"]), ("gated", [])):
            s = bench(a, f, extra)
            acc = " ".join(f"{v:.2f}" for v in s["acceptance_per_position"])
            print(f"  {os.path.basename(f):12s} {label:7s} tokens/pass {s['mean_accepted_length']:.2f}"
                  f" (acceptance by position {acc}), plain {s['plain_tokens_per_s']:.1f} tok/s,"
                  f" speculative {s['speculative_tokens_per_s']:.1f} tok/s = x{s['speedup']:.2f},"
                  f" paused {s['paused_steps']}, identical {s['identical_tokens']}")
    prompts = []
    for f in files:
        text = open(f, encoding="utf-8").read()
        prompts += [text[i * 3000 : i * 3000 + 1200] for i in range(3)]
    prompts = prompts[:8]
    print(f"B=8 (cedar serve --parallel 8, 8 concurrent greedy completions of {a.gen} tokens)")
    runs = {}
    for label, extra in (("plain", ["--speculative", "off"]),
                         ("always", ["--speculative", "dspark", "--spec-always"]),
                         ("gated", ["--speculative", "dspark"])):
        r = runs[label] = serve_batch(a, prompts, extra)
        print(f"  {label:7s} {r['tokens']} tokens in {r['wall_s']} s = {r['tokens_per_s']} tok/s,"
              f" verify passes {r['passes']}, tokens/pass {r['tokens_per_pass']}")
    same = all(runs[k]["texts"] == runs["plain"]["texts"] for k in runs)
    print(f"  identical texts across the three: {same}")


if __name__ == "__main__":
    main()
