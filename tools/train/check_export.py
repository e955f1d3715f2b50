#!/usr/bin/python3
"""The exported checkpoint computes what the trainer trained: the torch forward (QAT mode, sparse
indexer, candidate pool on) against cedar's reference-mode logits on the same ids.

    /usr/bin/python3 tools/train/check_export.py --template T --data D --state S --model M \
        --cedar build/cedar [--tokens 300] [--max-rel 0.05]

Prints the relative L2 difference of the full-vocabulary logits, the mean |diff|, the share of
positions whose argmax agrees, and the two cross-entropies; exits 1 if the relative difference
exceeds --max-rel or the argmax agreement is below --min-agree. A state with a drafter
(train_dspark.py's) also checks one draft cycle after the last position: the torch drafter fed
the engine's anchor and drafted tokens against `cedar logits --draft-out` (draft logits over the
full vocabulary and confidence logits; the same --max-rel). (The engine rounds to bf16 at every
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
from torch_dspark import DSpark  # noqa: E402
from torch_model import Ctx  # noqa: E402


def full_vocab(model, args, z):
    """Reduced-head logits [..., S+1] -> [..., V]: every unused row gets the "other" logit."""
    other = z[..., -1] - model.log_other  # h.u: the logit of every unused row
    full = other.unsqueeze(-1).repeat(*([1] * other.dim()), args.vocab_size)
    full[..., model.used_ids] = z[..., :-1]
    return full.numpy()


def torch_full_logits(model, args, hasher, ids, taps=None):
    with torch.no_grad():
        inp = torch.as_tensor(ids)[None]
        z = model(inp, T.hashes_of(hasher, args.engram_layer_ids, inp),
                  Ctx(qat=True, dense_index=False, candidates=True), taps)[0]
    return full_vocab(model, args, z)


def check_draft(model, drafter, args, hasher, ids, a):
    """One draft cycle after ids: the torch drafter fed the engine's tokens vs the engine."""
    taps = []
    torch_full_logits(model, args, hasher, ids, taps)
    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "ids.txt")
        np.savetxt(f, ids[None], fmt="%d", delimiter=",")
        subprocess.run([a.cedar, "logits", "--model", a.model, "--ids-file", f, "--kernels", "ref",
                        "--out", os.path.join(tmp, "c.npy"), "--draft-out", tmp],
                       check=True, capture_output=True)
        tokens, eng, conf = (np.load(os.path.join(tmp, n + ".npy"))
                             for n in ("tokens", "logits", "confidence"))
    K = args.dspark_block_size
    prev = torch.as_tensor(tokens[:K], dtype=torch.long).view(1, 1, K)
    with torch.no_grad():
        z, c = drafter(model, taps[0], torch.tensor([[len(ids) - 1]]), prev[..., 0], prev,
                       Ctx(qat=True))
    ours = full_vocab(model, args, z[0])
    rel = float(np.linalg.norm(eng - ours) / np.linalg.norm(eng))
    crel = float(np.abs(conf - c[0].numpy()).max())
    agree = int((eng.argmax(-1) == ours.argmax(-1)).sum())
    print(f"check_export: draft after {len(ids)} tokens, rel L2 {rel:.4f}, argmax agree "
          f"{agree}/{K}, confidence max |diff| {crel:.4f}")
    return rel <= a.max_rel and crel <= a.max_rel * 10


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
    model.load_state_dict({k: v for k, v in st["model"].items() if not k.startswith("mtp.")})
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
    ok = rel <= a.max_rel and agree >= a.min_agree
    if any(k.startswith("mtp.") for k in st["model"]):
        drafter = DSpark(args, len(model.used_ids) + 1)
        drafter.load_state_dict({k: v for k, v in st["model"].items() if k.startswith("mtp.")})
        drafter.eval()
        ok = check_draft(model, drafter, args, hasher, ids, a) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
