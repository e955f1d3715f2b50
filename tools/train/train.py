#!/usr/bin/python3
"""Trains the default cedar model (tools/train/README.md).

    /usr/bin/python3 tools/train/train.py --template TINY_DIR --data DATA_DIR --out RUN_DIR \
        --steps 3000 [--budget SECONDS] [--batch 8] [--seq 512] [--threads 2]

TEMPLATE is a `cedar make-model` directory: its config.json fixes the shapes and its
tokenizer.json the Engram token map. DATA is tools/train/data.py's output. RUN_DIR holds
state.pt (model, optimizer, step, RNG, time spent: the run resumes from it) and log.jsonl. The
schedule is in fractions of the run, steps or time budget whichever is further (Phases): dense indexer warm-up, then sparse Top-K; CED simulated on a
share of batches; the candidate pool in the late phase; QAT at the end.
"""

import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

import blas_select  # noqa: E402
import load_compact  # noqa: E402

blas_select.ensure()  # before numpy/torch load OpenBLAS

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from checkpoint import load_config  # noqa: E402
from engram import NgramHash, cached_token_map  # noqa: E402
from model import ModelArgs  # noqa: E402
from torch_model import Ctx, Transformer  # noqa: E402


class Phases:
    """What the step at fraction f of the run does (the fractions are train.py's flags)."""

    def __init__(self, dense_until, ced_from, pool_from, qat_from, ced_share=0.25):
        self.dense_until, self.ced_from, self.ced_share = dense_until, ced_from, ced_share
        self.pool_from, self.qat_from = pool_from, qat_from

    def ctx(self, f, rng, batch, seq):
        ced = None
        if f >= self.ced_from and rng.random() < self.ced_share:
            # replay start s: the decoder's window is cut at s for queries at or after s
            ced = torch.from_numpy(rng.integers(1, seq, size=batch)).long()
        return Ctx(qat=f >= self.qat_from, dense_index=f < self.dense_until,
                   candidates=f >= self.pool_from, ced_start=ced)


class Batches:
    """Rows of seq+1 tokens: a BOS then a corpus slice at a random offset, or packed
    conversations from a random conversation start (loss only on assistant turns)."""

    def __init__(self, data_dir, split, synth_share):
        ld = lambda n: np.load(os.path.join(data_dir, n))  # noqa: E731
        self.corpus = ld(f"corpus_{split}.npy")
        self.synth = ld(f"synth_{split}.npy")
        self.mask = ld(f"synth_{split}_mask.npy")
        self.starts = ld(f"synth_{split}_starts.npy")
        self.synth_share = synth_share

    def row(self, rng, n):
        if rng.random() < self.synth_share and len(self.synth) > n:
            ok = self.starts[self.starts + n <= len(self.synth)]
            s = int(ok[rng.integers(len(ok))]) if len(ok) else 0
            return self.synth[s : s + n].astype(np.int64), self.mask[s : s + n].astype(np.float32)
        s = int(rng.integers(0, max(1, len(self.corpus) - n)))
        ids = np.concatenate([[0], self.corpus[s : s + n - 1]]).astype(np.int64)
        return ids, np.ones(n, dtype=np.float32)

    def get(self, rng, batch, seq):
        rows = [self.row(rng, seq + 1) for _ in range(batch)]
        ids = torch.from_numpy(np.stack([r[0] for r in rows]))
        mask = torch.from_numpy(np.stack([r[1] for r in rows]))
        return ids, mask


def hashes_of(hasher, layer_ids, ids):
    """{layer: long [B, T, cols]} Engram row ids of every row (each row starts at position 0)."""
    if hasher is None:
        return {}
    per_row = np.stack([hasher(r) for r in ids.numpy()], axis=1)  # [n_layers, B, T, cols]
    return {l: torch.from_numpy(per_row[i]) for i, l in enumerate(layer_ids)}


def build(template, data_dir):
    text_cfg, _ = load_config(template)
    args = ModelArgs.from_config(text_cfg)
    used = np.load(os.path.join(data_dir, "used_ids.npy"))
    rows = {l: int(args.engram_num_embeddings[i]) for i, l in enumerate(args.engram_layer_ids)}
    model = Transformer(args, used, rows)
    hasher = None
    if args.engram_layer_ids:
        token_map, n = cached_token_map(os.path.join(template, "tokenizer.json"))
        hasher = NgramHash(args, token_map, n)
    return args, model, hasher


def loss_of(model, args, hasher, ids, mask, ctx):
    """Masked next-token cross-entropy over the reduced head (nats per scored token)."""
    inp, tgt, m = ids[:, :-1], ids[:, 1:], mask[:, 1:]
    logits = model(inp, hashes_of(hasher, args.engram_layer_ids, inp), ctx)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), model.targets(tgt).reshape(-1),
                         reduction="none")
    return (ce * m.reshape(-1)).sum() / m.sum().clamp(min=1)


def lr_at(step, f, peak, warmup):
    """Linear warm-up over `warmup` steps, then cosine to 10% of the peak at f = 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, f))))


class Budget:
    """Where a run stands in its schedule: max(step / steps, seconds spent / budget), the time
    counted across resumes (`spent` is what the earlier sessions used)."""

    def __init__(self, steps, budget, spent):
        self.steps, self.budget, self.spent, self.t0 = steps, budget, spent, time.time()

    def elapsed(self):
        return self.spent + time.time() - self.t0

    def progress(self, step):
        f = step / self.steps
        return max(f, self.elapsed() / self.budget) if self.budget else f


def log_record(log, rec, loud):
    """One step's record as a line of the run's log.jsonl, and on stdout when `loud`."""
    line = json.dumps(rec)
    log.write(line + "\n")
    log.flush()
    if loud:
        print(line, flush=True)


def save_atomic(obj, path):
    """torch.save through a temporary file renamed over the old state: a killed run leaves the
    previous state whole."""
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


@torch.no_grad()
def evaluate(model, args, hasher, data, rng, batches, batch, seq):
    model.eval()
    tot = 0.0
    for _ in range(batches):
        ids, mask = data.get(rng, batch, seq)
        tot += float(loss_of(model, args, hasher, ids, mask, Ctx(dense_index=False, candidates=True)))
    model.train()
    return tot / batches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--synth-share", type=float, default=0.5)
    ap.add_argument("--kl-weight", type=float, default=1.0)
    ap.add_argument("--balance", type=float, default=1e-4)
    ap.add_argument("--bias-speed", type=float, default=0.01)
    ap.add_argument("--init", help="start from a compact model (models/default/) instead of random")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save-every", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=200)
    ap.add_argument("--dense-until", type=float, default=0.1,
                    help="fraction of the run with the dense indexer warm-up (0 when continuing "
                         "from a trained model: its indexer is trained)")
    ap.add_argument("--ced-from", type=float, default=0.3,
                    help="fraction from which CED is simulated")
    ap.add_argument("--pool-from", type=float, default=0.6,
                    help="fraction from which the candidate pool is on")
    ap.add_argument("--qat-from", type=float, default=0.85, help="fraction from which QAT is on")
    ap.add_argument("--budget", type=float, default=0,
                    help="seconds of training in all (across resumes): the schedule runs on "
                         "max(step/steps, time/budget) and the run ends when either is spent")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    args, model, hasher = build(a.template, a.data)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    os.makedirs(a.out, exist_ok=True)
    state_path = os.path.join(a.out, "state.pt")
    step, rng, spent = 0, np.random.default_rng(a.seed), 0.0
    if os.path.exists(state_path):
        st = torch.load(state_path)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step = st["step"]
        spent = st.get("spent", 0.0)
        rng.bit_generator.state = st["rng"]
        print(f"resumed at step {step}", flush=True)
    elif a.init:
        load_compact.load_into(model, a.init)
    train = Batches(a.data, "train", a.synth_share)
    held = Batches(a.data, "heldout", a.synth_share)
    phases = Phases(dense_until=a.dense_until, ced_from=a.ced_from, pool_from=a.pool_from,
                    qat_from=a.qat_from)
    log = open(os.path.join(a.out, "log.jsonl"), "a")
    clock = Budget(a.steps, a.budget, spent)

    def progress():
        return clock.progress(step)

    def save():
        save_atomic({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                     "rng": rng.bit_generator.state, "spent": clock.elapsed(), "args": vars(a)},
                    state_path)

    while progress() < 1:
        f = progress()
        ctx = phases.ctx(f, rng, a.batch, a.seq)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, f, a.lr, a.warmup)
        ids, mask = train.get(rng, a.batch, a.seq)
        ce = loss_of(model, args, hasher, ids, mask, ctx)
        kl = sum(ctx.index_kl) if ctx.index_kl else torch.zeros(())
        bal = sum(ctx.balance)
        loss = ce + a.kl_weight * kl + a.balance * bal
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        model.update_bias(ctx, a.bias_speed)
        step += 1
        rec = {"step": step, "ce": round(float(ce), 4), "kl": round(float(kl), 4),
               "bal": round(float(bal), 3), "gn": round(float(gn), 3), "qat": ctx.qat,
               "dense": ctx.dense_index, "ced": ctx.ced_start is not None,
               "f": round(progress(), 4), "s": round(clock.elapsed(), 1)}
        done = progress() >= 1
        if step % a.eval_every == 0 or done:
            rec["heldout_ce"] = round(evaluate(model, args, hasher, held, np.random.default_rng(7), 4, a.batch, a.seq), 4)
        log_record(log, rec, step % 10 == 0 or "heldout_ce" in rec)
        if step % a.save_every == 0 or done:
            save()
    print(f"done: step {step}, {clock.elapsed():.0f} s", flush=True)


if __name__ == "__main__":
    main()
