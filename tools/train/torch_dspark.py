"""The DSpark drafter in torch, for training (ref: tools/reference/dspark.py, itself the release's
model.py DSparkAttention / DSparkBlock / forward_spec; spec v41-extras §2.4).

Training runs many draft cycles of one sequence at once: after the frozen target processed a
batch of sequences (its taps and its next-token distributions at every position), every chosen
anchor position p gives one cycle: the block [ids[p+1], noise x (K-1)] at positions p+1 .. p+K,
attending to the ring rows max(0, p-W+1) .. p of each stage's main_kv and to every block row,
with the Markov head fed the data's previous token (teacher forcing). State-dict keys are the
checkpoint's names (`mtp.{s}.…`), so export.py writes them as they are; the Markov tables are
kept over the target's reduced vocabulary (the used ids plus the "other" row), as embed/head.
"""

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

import quant as Q
from torch_model import Attention, Block, Linear, RMSNorm, _param, rope_tail


def rotate_at(x, cos, sin, inverse=False):
    """Interleaved-pair RoPE of x [N, K, ..., rd] with per-row angles cos/sin [N, K, rd/2]."""
    N, K, half = cos.shape
    shape = [N, K] + [1] * (x.dim() - 3) + [half, 1]
    c, s = cos.view(shape), sin.view(shape)
    if inverse:
        s = -s
    xp = x.unflatten(-1, (-1, 2))
    swapped = torch.stack([-xp[..., 1], xp[..., 0]], dim=-1)
    return (xp * c + swapped * s).flatten(-2)


def rope_tail_at(x, rd, cos, sin, inverse=False):
    return torch.cat([x[..., :-rd], rotate_at(x[..., -rd:], cos, sin, inverse)], dim=-1)


class DSparkAttention(Attention):
    """ref: dspark.py DSparkAttention: window-only, the stage's ring of main_kv rows + the block
    (no causal mask among the block's rows), the sink, the grouped low-rank output."""

    def window_kv(self, kv, ctx):
        return Q.ste(kv, Q.bf16_round(Q.act_quant(kv))) if ctx.qat else kv

    def main_kv(self, main_x, ctx):
        """main_kv [B, T, hd] of every position of main_x [B, T, D]."""
        cos, sin = self.cos_sin(torch.arange(main_x.shape[1]))
        kv = rope_tail(self.kv_norm(self.wkv(main_x, ctx), ctx), self.rd, cos, sin)
        return self.window_kv(kv, ctx)

    def forward(self, x, state, ctx):
        """x [N, K, D]: the blocks' normalised rows, N = B * A cycles; state["p"] long [B, A]
        (each cycle's last target position), state["main_x"] [B, T, D]."""
        p, main_x = state["p"], state["main_x"]
        B, A = p.shape
        N, K, _ = x.shape
        H, hd, rd, W = self.H, self.hd, self.rd, self.window
        pos = (p.reshape(N, 1) + 1 + torch.arange(K)).float()  # [N, K]
        ang = pos.unsqueeze(-1) * self.freqs
        cos, sin = torch.cos(ang), torch.sin(ang)
        qr = self.q_norm(self.wq_a(x, ctx), ctx)
        q = rope_tail_at(self.wq_b(qr, ctx).view(N, K, H, hd), rd, cos, sin)
        kv = self.window_kv(rope_tail_at(self.kv_norm(self.wkv(x, ctx), ctx), rd, cos, sin), ctx)
        ring = self.main_kv(main_x, ctx)  # [B, T, hd]
        T = ring.shape[1]
        lr = torch.einsum("bakhd,btd->bakht", q.view(B, A, K, H, hd), ring) * self.scale
        t = torch.arange(T).view(1, 1, T)
        pp = p.unsqueeze(-1)
        ok = (t <= pp) & (t > pp - W)  # [B, A, T]
        lr = lr.masked_fill(~ok.view(B, A, 1, 1, T), -math.inf).view(N, K, H, T)
        lb = torch.einsum("nkhd,njd->nkhj", q, kv) * self.scale  # [N, K, H, K]
        sink = self.attn_sink.view(1, 1, H)
        m = torch.maximum(torch.maximum(lr.amax(-1), lb.amax(-1)), sink).detach()
        er, eb = torch.exp(lr - m.unsqueeze(-1)), torch.exp(lb - m.unsqueeze(-1))
        den = er.sum(-1) + eb.sum(-1) + torch.exp(sink - m)
        o = torch.einsum("bakht,btd->bakhd", (er / den.unsqueeze(-1)).view(B, A, K, H, T), ring)
        o = o.reshape(N, K, H, hd) + torch.einsum("nkhj,njd->nkhd", eb / den.unsqueeze(-1), kv)
        o = rope_tail_at(o, rd, cos, sin, inverse=True).reshape(N, K, self.G, -1)
        wo_a = self.wo_a.qweight(ctx).view(self.G, self.R, -1)
        u = torch.einsum("nkgd,grd->nkgr", o, wo_a).reshape(N, K, self.G * self.R)
        return self.wo_b(u, ctx)


class DSparkBlock(Block):
    attention_cls = DSparkAttention


class DSpark(nn.Module):
    """The stages (`mtp.{s}`), stage 0's context projection, the last stage's norm, Markov head
    and confidence head. The target's embedding and head are borrowed, never trained."""

    def __init__(self, args, n_classes):
        super().__init__()
        S, D, r = args.n_mtp_layers, args.dim, args.dspark_markov_rank
        if S == 0:
            raise ValueError("the template has no DSpark stages (num_nextn_predict_layers 0)")
        self.args = args
        sargs = copy.copy(args)
        sargs.n_routed_experts = args.dspark_n_routed_experts or args.n_routed_experts
        sargs.n_activated_experts = args.dspark_n_activated_experts or args.n_activated_experts
        self.mtp = nn.ModuleList([DSparkBlock(sargs, args.n_layers + s) for s in range(S)])
        first, last = self.mtp[0], self.mtp[-1]
        n_taps = len(args.dspark_target_layer_ids)
        first.main_proj = Linear(D, n_taps * D, "fp8")
        first.main_norm = RMSNorm(D, args.norm_eps)
        last.norm = RMSNorm(D, args.norm_eps)
        last.markov_head = nn.Module()
        last.markov_head.embed = nn.Module()
        last.markov_head.embed.weight = _param(n_classes, r, std=1.0)
        last.markov_head.head = nn.Module()
        last.markov_head.head.weight = nn.Parameter(torch.zeros(n_classes, r))
        last.confidence_head = nn.Module()
        last.confidence_head.proj = nn.Module()
        last.confidence_head.proj.weight = nn.Parameter(torch.zeros(1, D + r))

    def _bf16(self, w, ctx):
        return Q.ste(w, Q.bf16_round(w)) if ctx.qat else w

    def forward(self, target, taps, p, anchors, prev, ctx):
        """taps [B, T, n_taps*D] (detached), p long [B, A] cycle positions, anchors long [B, A]
        (the ids at p+1), prev long [B, A, K] (the Markov inputs: the anchor, then the tokens
        before rows 1..K-1) -> (draft logits [N, K, classes], confidence logits [N, K])."""
        a = self.args
        B, A = p.shape
        K, hc, N = a.dspark_block_size, a.hc_mult, B * A
        first, last = self.mtp[0], self.mtp[-1]
        main_x = first.main_norm(first.main_proj(taps, ctx), ctx)
        ids = torch.full((N, K), a.dspark_noise_token_id, dtype=torch.long)
        ids[:, 0] = anchors.reshape(N)
        with torch.no_grad():
            e = F.embedding(target.local[ids], target._bf16(target.embed.weight, ctx))
        h = e.unsqueeze(2).expand(N, K, hc, a.dim)
        pre = torch.zeros(N, K, hc)
        pre[..., 0] = 1
        state = {"p": p, "main_x": main_x}
        for st in self.mtp:
            h, pre = st(h, pre, state, ctx)
        y = Block.hc_pre(h, pre)
        if ctx.qat:
            y = Q.ste(y, Q.bf16_round(y))
        with torch.no_grad():
            w = target._bf16(torch.cat([target.head.weight, target.head_other.unsqueeze(0)]), ctx)
        base = F.linear(last.norm(y, ctx), w, target.other_bias)
        em = self._bf16(last.markov_head.embed.weight, ctx)[target.local[prev.reshape(N, K)]]
        logits = base + F.linear(em, self._bf16(last.markov_head.head.weight, ctx))
        wc = self._bf16(last.confidence_head.proj.weight, ctx)[0]
        conf = torch.cat([y, em], dim=-1) @ wc
        return logits, conf

    @torch.no_grad()
    def update_bias(self, ctx, speed):
        """The stages' routers balance by the same sign rule as the backbone's."""
        for st in self.mtp:
            load = ctx.loads.get(st.ffn.layer_id)
            if load is not None:
                st.ffn.gate.bias += speed * torch.sign(load.mean() - load)


def anchor_weights(kept, K, focus):
    """[N, K] loss weights that aim at the drafts a verify pass would reject first. Decoding's
    tokens per pass is the harmonic mean of 1 + kept over the anchors (train_dspark.py), so one
    more kept draft at an anchor that keeps k is worth 1 / ((1 + k)(2 + k)) of a pass: 1/2 at
    k = 0, 1/12 at k = 2, 1/30 at k = 4. Those weights, scaled to a mean of 1 over the anchors,
    go to the rows up to and including the first rejected one (the rows after it cannot change
    this pass); `focus` blends them with the paper's uniform weights (0: the paper's loss)."""
    k = kept.double()
    gain = 1 / ((1 + k) * (2 + k))
    upto = torch.arange(K).unsqueeze(0) <= kept.unsqueeze(-1)  # [N, K]
    aimed = (gain / gain.mean()).unsqueeze(-1) * upto
    return ((1 - focus) + focus * aimed).float()


def draft_loss(logits, conf, target_logits, labels, gamma, focus=0.0):
    """ref: the DSpark paper §3.3 (spec v41-extras §2.8): 0.1 CE + 0.9 sum_k w_k |p_d - p_t|_1
    + BCE(confidence, 1 - |p_d - p_t|_1 / 2), w_k = exp(-(k-1)/gamma). logits/target_logits
    [N, K, C], labels [N, K] class ids, conf [N, K]. `focus` > 0 reweighs the CE and L1 terms per
    anchor and row (anchor_weights; ours, not the paper's). Returns (loss, parts dict)."""
    N, K, C = logits.shape
    same = logits.argmax(-1) == target_logits.argmax(-1)
    kept = same.long().cumprod(-1).sum(-1)  # [N] greedy drafts a verify would keep
    wa = anchor_weights(kept, K, focus)  # all ones at focus 0
    ce_rows = F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1), reduction="none")
    ce = (ce_rows * wa.reshape(-1)).mean()
    pd = torch.softmax(logits, -1)
    pt = torch.softmax(target_logits, -1)
    l1 = (pd - pt).abs().sum(-1)  # [N, K]
    wk = torch.exp(-torch.arange(K, dtype=torch.float32) / gamma)
    dist = ((l1 * wa).mean(0) * wk).sum()
    soft = (1 - 0.5 * l1).detach().clamp(0, 1)
    bce = F.binary_cross_entropy_with_logits(conf, soft)
    agree = same.float().mean(0)  # per row k
    loss = 0.1 * ce + 0.9 * dist + bce
    return loss, {"ce": ce, "l1": l1.mean(0), "bce": bce, "agree": agree, "kept": kept}
