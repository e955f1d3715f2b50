#!/usr/bin/python3
"""Trains the DSpark drafter (mtp.*) of a trained target, the target frozen (tools/train/README.md).

    /usr/bin/python3 tools/train/train_dspark.py --template TPL --data DATA --init models/default \
        --out RUN_DIR [--steps 2000] [--budget SECONDS] [--batch 4] [--seq 512] [--anchors 48]

TPL is a `cedar make-model` directory of the target's preset with its DSpark stages (the presets
carry them); --init the trained target (compact form). Each step runs the target once over a
batch (QAT forward, as the engine computes it: its taps and next-token distributions), then
`--anchors` draft cycles per row at random positions, and trains the drafter by the paper's loss
(torch_dspark.draft_loss). `--distill-share` rows are the target's own greedy continuations
(distill_data.py, in DATA): what the drafter meets when it drafts, and far more repetitive
than the corpus; their cycles anchor on the generated tokens. RUN_DIR/state.pt holds the drafter, optimizer, step, RNG and time
spent (the run resumes from it) and, under "model", target + drafter in export.py's form:
`export.py --state RUN_DIR/state.pt --compact` writes the model with its drafter.
The log reports, per draft row, how often the draft's argmax equals the target's, and the
tokens per greedy verify pass those agreements give (1 + the leading rows that agree;
teacher-forced: the rows see the data's tokens, which on distilled rows are the target's own).
"""

import argparse
import os
import sys

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


class Rows:
    """Training rows: the target's own greedy continuations (distill_data.py) with probability
    `distill_share`, else train.py's corpus/conversation rows. Each row comes with the positions
    a draft cycle may anchor at: on distilled rows, where the anchor is a generated token."""

    def __init__(self, data_dir, split, synth_share, distill_share):
        self.base = TR.Batches(data_dir, split, synth_share)
        self.distill_share = distill_share
        if distill_share > 0:
            ld = lambda n: np.load(os.path.join(data_dir, n))  # noqa: E731
            self.ids, self.gen = ld("distill_train.npy"), ld("distill_train_gen.npy")
            starts = ld("distill_train_starts.npy")
            cut = len(starts) - max(1, len(starts) // 20)  # the last 5% of sequences held out
            self.lo, self.hi = (0, int(starts[cut])) if split == "train" else (int(starts[cut]), len(self.ids))
            self.starts = starts[(starts >= self.lo) & (starts < self.hi)]

    def row(self, rng, n):
        """n ids from a sequence start (any position when no start leaves n ids in the split)."""
        if self.distill_share > 0 and rng.random() < self.distill_share:
            ok = self.starts[self.starts + n <= self.hi]
            if len(ok):
                s = int(ok[rng.integers(len(ok))])
            elif self.hi - self.lo >= n:
                s = int(rng.integers(self.lo, self.hi - n + 1))
            else:
                raise ValueError(f"the distilled data's split holds {self.hi - self.lo} ids, "
                                 f"a row needs {n}: more --count or a shorter --seq")
            return self.ids[s : s + n].astype(np.int64), self.gen[s : s + n].astype(bool)
        ids, _ = self.base.row(rng, n)
        return ids, np.ones(n, dtype=bool)

    def get(self, rng, batch, seq):
        rows = [self.row(rng, seq + 1) for _ in range(batch)]
        return torch.from_numpy(np.stack([r[0] for r in rows])), [r[1] for r in rows]


def cycles(rng, allowed, K, A):
    """Cycle positions p [B, A]: the target processed 0..p, the anchor is ids[p+1] (a position
    `allowed` marks), and rows p+1 .. p+K need their next ids inside the row (p <= T - 2 - K).
    A shrinks to the row with the fewest candidates (one tensor for the batch)."""
    hi = len(allowed[0]) - 1 - K
    cand = [np.flatnonzero(a[1 : hi + 1]) for a in allowed]
    A = max(1, min([A] + [len(c) for c in cand]))
    pick = [np.sort(rng.choice(c, size=A, replace=False)) if len(c) >= A else
            np.sort(rng.choice(hi, size=A, replace=False)) for c in cand]
    return torch.from_numpy(np.stack(pick))


def step_batch(target, drafter, args, hasher, ids, p, ctx, focus=0.0):
    """(loss, parts) of the draft cycles at p [B, A] over ids [B, T]; `focus` as draft_loss's."""
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
    loss, parts = draft_loss(logits, conf, t_rows, labels, gamma=float(K), focus=focus)
    return loss + 1e-4 * sum(ctx.balance), parts


def tokens_per_pass(kept):
    """(per pass as decoding meets them, per anchor) from the kept drafts of uniformly drawn
    anchors. Decoding does not draw its anchors uniformly: a pass that keeps j drafts skips the
    next j anchors, so easy stretches take few passes and hard ones many. A stretch of n tokens
    where passes keep j costs n / (1 + j) passes, so tokens per pass is the harmonic mean of
    1 + kept over the anchors; the plain mean counts a looping stretch as often as a hard one
    and overstates what the engine reaches whenever acceptance is uneven."""
    n = 1 + kept.double()
    return float(1 / (1 / n).mean()), float(n.mean())


@torch.no_grad()
def evaluate(target, drafter, args, hasher, data, batches, batch, seq, anchors, qat):
    drafter.eval()
    rng = np.random.default_rng(7)
    agree, kept = [], []
    for _ in range(batches):
        ids, allowed = data.get(rng, batch, seq)
        p = cycles(rng, allowed, args.dspark_block_size, anchors)
        _, parts = step_batch(target, drafter, args, hasher, ids, p, Ctx(qat=qat))
        agree.append(parts["agree"])
        kept.append(parts["kept"])
    drafter.train()
    return torch.stack(agree).mean(0).tolist(), tokens_per_pass(torch.cat(kept))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--init", required=True, help="the trained target, compact (models/default)")
    ap.add_argument("--init-drafter", help="a compact model whose mtp.* tensors start the drafter "
                    "(the committed drafter, when its target was trained further); default random")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--budget", type=float, default=0, help="seconds in all, as train.py's")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--anchors", type=int, default=48, help="draft cycles per row and step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--synth-share", type=float, default=0.5)
    ap.add_argument("--distill-share", type=float, default=0.0,
                    help="share of rows from distill_data.py's greedy continuations")
    ap.add_argument("--qat-from", type=float, default=0.5, help="fraction of the run")
    ap.add_argument("--bias-speed", type=float, default=0.01)
    ap.add_argument("--focus", type=float, default=0.0,
                    help="share of the loss aimed at the first rejected drafts "
                    "(torch_dspark.anchor_weights); 0 is the paper's loss")
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
    if a.init_drafter:
        load_compact.load_drafter(drafter, a.init_drafter, target.used_ids.numpy())
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
    train = Rows(a.data, "train", a.synth_share, a.distill_share)
    held = Rows(a.data, "heldout", a.synth_share, a.distill_share)
    log = open(os.path.join(a.out, "log.jsonl"), "a")
    clock = TR.Budget(a.steps, a.budget, spent)

    def progress():
        return clock.progress(step)

    def save():
        TR.save_atomic({"dspark": drafter.state_dict(), "opt": opt.state_dict(), "step": step,
                        "rng": rng.bit_generator.state, "spent": clock.elapsed(),
                        "args": vars(a), "model": {**target.state_dict(), **drafter.state_dict()}},
                       state_path)

    while progress() < 1:
        f = progress()
        ctx = Ctx(qat=f >= a.qat_from)
        for g in opt.param_groups:
            g["lr"] = TR.lr_at(step, f, a.lr, a.warmup)
        ids, allowed = train.get(rng, a.batch, a.seq)
        p = cycles(rng, allowed, args.dspark_block_size, a.anchors)
        loss, parts = step_batch(target, drafter, args, hasher, ids, p, ctx, a.focus)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(drafter.parameters(), 1.0)
        opt.step()
        drafter.update_bias(ctx, a.bias_speed)
        step += 1
        rec = {"step": step, "loss": round(float(loss), 4), "ce": round(float(parts["ce"]), 4),
               "l1": [round(float(v), 3) for v in parts["l1"]], "bce": round(float(parts["bce"]), 4),
               "agree": [round(float(v), 3) for v in parts["agree"]], "gn": round(float(gn), 3),
               "qat": ctx.qat, "f": round(progress(), 4), "s": round(clock.elapsed(), 1)}
        done = progress() >= 1
        if step % a.eval_every == 0 or done:
            ag, (tpp, per_anchor) = evaluate(target, drafter, args, hasher, held, 2, a.batch,
                                             a.seq, a.anchors, ctx.qat)
            rec["heldout_agree"] = [round(v, 3) for v in ag]
            rec["heldout_tokens_per_pass"] = round(tpp, 3)
            rec["heldout_per_anchor"] = round(per_anchor, 3)
        TR.log_record(log, rec, step % 10 == 0 or "heldout_agree" in rec)
        if step % a.save_every == 0 or done:
            save()
    print(f"done: step {step}, {clock.elapsed():.0f} s", flush=True)


if __name__ == "__main__":
    main()
