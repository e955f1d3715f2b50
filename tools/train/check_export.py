#!/usr/bin/python3
"""The exported checkpoint computes what the trainer trained: the torch forward (QAT mode, sparse
indexer, candidate pool on) against cedar's reference-mode logits on the same ids.

    /usr/bin/python3 tools/train/check_export.py --template T --data D --state S --model M \
        --cedar build/cedar [--tokens 300] [--max-rel 0.05]

Prints the relative L2 difference of the full-vocabulary logits, the mean |diff|, the share of
positions whose argmax agrees, and the two cross-entropies; exits 1 if the relative difference
exceeds --max-rel or the argmax agreement is below --min-agree. (The engine rounds to bf16 at every
step of docs/NUMERICS.md; the trainer's fp32 forward does not, so they are close, not equal.)
"""

import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import train as T  # noqa: E402
from torch_model import Ctx  # noqa: E402


def torch_full_logits(model, args, hasher, ids):
    with torch.no_grad():
        inp = torch.as_tensor(ids)[None]
        z = model(inp, T.hashes_of(hasher, args.engram_layer_ids, inp),
                  Ctx(qat=True, dense_index=False, candidates=True))[0]
    other = z[:, -1] - model.log_other  # h.u: the logit of every unused row
    full = other[:, None].repeat(1, args.vocab_size)
    full[:, model.used_ids] = z[:, :-1]
    return full.numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for k in ("template", "data", "state", "model", "cedar"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--tokens", type=int, default=300)
    ap.add_argument("--max-rel", type=float, default=0.05)
    ap.add_argument("--min-agree", type=float, default=0.9)
    a = ap.parse_args()
    args, model, hasher = T.build(a.template, a.data)
    st = torch.load(a.state)
    model.load_state_dict(st["model"])
    model.eval()
    held = np.load(os.path.join(a.data, "corpus_heldout.npy"))
    ids = np.concatenate([[0], held[: a.tokens - 1]]).astype(np.int64)
    ours = torch_full_logits(model, args, hasher, ids)
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "ids.txt")
        np.savetxt(f, ids[None], fmt="%d", delimiter=",")
        out = os.path.join(tmp, "c.npy")
        subprocess.run([a.cedar, "logits", "--model", a.model, "--ids-file", f, "--kernels", "ref",
                        "--out", out], check=True, capture_output=True)
        eng = np.load(out)
    rel = float(np.linalg.norm(eng - ours) / np.linalg.norm(eng))
    agree = float((eng.argmax(-1) == ours.argmax(-1)).mean())

    def ce(lg):
        lg = lg[:-1].astype(np.float64)
        m = lg.max(-1, keepdims=True)
        lse = (m + np.log(np.exp(lg - m).sum(-1, keepdims=True)))[:, 0]
        return float((lse - lg[np.arange(len(lg)), ids[1:]]).mean())

    print(f"check_export: {len(ids)} tokens, rel L2 {rel:.4f}, mean |diff| "
          f"{np.abs(eng - ours).mean():.4f}, argmax agree {agree:.3f}, "
          f"CE engine {ce(eng):.4f} trainer {ce(ours):.4f}")
    sys.exit(0 if rel <= a.max_rel and agree >= a.min_agree else 1)


if __name__ == "__main__":
    main()
