#!/usr/bin/python3
"""Trains the DSpark drafter (mtp.*) of a trained target, the target frozen (tools/train/README.md).

    /usr/bin/python3 tools/train/train_dspark.py --template TPL --data DATA --init models/default \
        --out RUN_DIR [--steps 2000] [--budget SECONDS] [--batch 4] [--seq 512] [--anchors 48]

TPL is a `cedar make-model` directory of the target's preset with its DSpark stages (the presets
carry them); --init the trained target (compact form). Each step runs the target once over a
batch (QAT forward, as the engine computes it: its taps and next-token distributions), then
`--anchors` draft cycles per row at random positions, and trains the drafter by the paper's loss
(torch_dspark.draft_loss). RUN_DIR/state.pt holds the drafter, optimizer, step, RNG and time
spent (the run resumes from it) and, under "model", target + drafter in export.py's form:
`export.py --state RUN_DIR/state.pt --compact` writes the model with its drafter.
The log reports, per draft row, how often the draft's argmax equals the target's, and the
greedy accepted length those agreements imply (teacher-forced: the rows see the data's tokens).
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import blas_select  # noqa: E402

blas_select.ensure()

import numpy as np  # noqa: E402
import torch  # noqa: E402

import load_compact  # noqa: E402
import train as TR  # noqa: E402
from torch_dspark import DSpark, draft_loss  # noqa: E402
from torch_model import Ctx  # noqa: E402


def cycles(rng, B, T, K, A):
    """Cycle positions p [B, A]: the target processed 0..p, the anchor is ids[p+1], and rows
    p+1 .. p+K need their next ids inside the row (p <= T - 2 - K)."""
    hi = T - 1 - K
    A = min(A, hi)
    return torch.from_numpy(np.stack([np.sort(rng.choice(hi, size=A, replace=False)) for _ in range(B)]))


def step_batch(target, drafter, args, hasher, ids, p, ctx):
    """(loss, parts) of the draft cycles at p [B, A] over ids [B, T]."""
    B, A = p.shape
    K = args.dspark_block_size
    with torch.no_grad():
        taps = []
        tl = target(ids, TR.hashes_of(hasher, args.engram_layer_ids, ids),
                    Ctx(qat=True, dense_index=False, candidates=True), taps)
    rows = p.unsqueeze(-1) + 1 + torch.arange(K)  # [B, A, K] positions of the block's rows
    flat = rows.reshape(B, -1)
    prev = ids.gather(1, flat).view(B, A, K)  # row k's Markov input: the id at its position
    labels = target.targets(ids.gather(1, flat + 1)).view(B * A, K)
    C = tl.shape[-1]
    t_rows = tl.gather(1, flat.unsqueeze(-1).expand(B, A * K, C)).view(B * A, K, C)
    logits, conf = drafter(target, taps[0], p, prev[..., 0], prev, ctx)
    loss, parts = draft_loss(logits, conf, t_rows, labels, gamma=float(K))
    return loss + 1e-4 * sum(ctx.balance), parts


def accepted_length(agree_rows):
    """Expected greedy tokens per verify pass implied by per-row agreement rates (as if rows
    agreed independently given the earlier ones): 1 + sum_k prod_{i<=k} a_i."""
    tot, run = 1.0, 1.0
    for a in agree_rows:
        run *= a
        tot += run
    return tot


@torch.no_grad()
def evaluate(target, drafter, args, hasher, data, batches, batch, seq, anchors, qat):
    drafter.eval()
    rng = np.random.default_rng(7)
    agree = []
    for _ in range(batches):
        ids, _ = data.get(rng, batch, seq)
        p = cycles(rng, ids.shape[0], ids.shape[1], args.dspark_block_size, anchors)
        _, parts = step_batch(target, drafter, args, hasher, ids, p, Ctx(qat=qat))
        agree.append(parts["agree"])
    drafter.train()
    return torch.stack(agree).mean(0).tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--init", required=True, help="the trained target, compact (models/default)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--budget", type=float, default=0, help="seconds in all, as train.py's")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--anchors", type=int, default=48, help="draft cycles per row and step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--synth-share", type=float, default=0.5)
    ap.add_argument("--qat-from", type=float, default=0.5, help="fraction of the run")
    ap.add_argument("--bias-speed", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=100)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    args, target, hasher = TR.build(a.template, a.data)
    load_compact.load_into(target, a.init)
    target.eval()
    target.requires_grad_(False)
    drafter = DSpark(args, len(target.used_ids) + 1)
    opt = torch.optim.AdamW(drafter.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.01)
    os.makedirs(a.out, exist_ok=True)
    state_path = os.path.join(a.out, "state.pt")
    step, rng, spent = 0, np.random.default_rng(a.seed), 0.0
    if os.path.exists(state_path):
        st = torch.load(state_path)
        drafter.load_state_dict(st["dspark"])
        opt.load_state_dict(st["opt"])
        step, spent = st["step"], st["spent"]
        rng.bit_generator.state = st["rng"]
        print(f"resumed at step {step}", flush=True)
    train = TR.Batches(a.data, "train", a.synth_share)
    held = TR.Batches(a.data, "heldout", a.synth_share)
    log = open(os.path.join(a.out, "log.jsonl"), "a")
    t0 = time.time()

    def elapsed():
        return spent + time.time() - t0

    def progress():
        f = step / a.steps
        return max(f, elapsed() / a.budget) if a.budget else f

    def save():
        model = {**target.state_dict(), **drafter.state_dict()}
        tmp = state_path + ".tmp"
        torch.save({"dspark": drafter.state_dict(), "opt": opt.state_dict(), "step": step,
                    "rng": rng.bit_generator.state, "spent": elapsed(), "args": vars(a),
                    "model": model}, tmp)
        os.replace(tmp, state_path)

    while progress() < 1:
        f = progress()
        ctx = Ctx(qat=f >= a.qat_from)
        for g in opt.param_groups:
            g["lr"] = TR.lr_at(step, f, a.lr, a.warmup)
        ids, _ = train.get(rng, a.batch, a.seq)
        p = cycles(rng, ids.shape[0], ids.shape[1], args.dspark_block_size, a.anchors)
        loss, parts = step_batch(target, drafter, args, hasher, ids, p, ctx)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        drafter.update_bias(ctx, a.bias_speed)
        step += 1
        rec = {"step": step, "loss": round(float(loss), 4), "ce": round(float(parts["ce"]), 4),
               "l1": [round(float(v), 3) for v in parts["l1"]], "bce": round(float(parts["bce"]), 4),
               "agree": [round(float(v), 3) for v in parts["agree"]], "gn": round(float(gn), 3),
               "qat": ctx.qat, "f": round(progress(), 4), "s": round(elapsed(), 1)}
        done = progress() >= 1
        if step % a.eval_every == 0 or done:
            ag = evaluate(target, drafter, args, hasher, held, 2, a.batch, a.seq, a.anchors, ctx.qat)
            rec["heldout_agree"] = [round(v, 3) for v in ag]
            rec["heldout_tokens_per_pass"] = round(accepted_length(ag), 3)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        if step % 10 == 0 or "heldout_agree" in rec:
            print(json.dumps(rec), flush=True)
        if step % a.save_every == 0 or done:
            save()
    print(f"done: step {step}, {elapsed():.0f} s", flush=True)


if __name__ == "__main__":
    main()
