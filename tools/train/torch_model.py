"""The DeepSeek-V4.1 text model in torch, for training: the structure and names of
tools/reference/model.py (itself the release's inference/model.py), batched [B, T], in fp32.

What training adds to the inference forward:
- `Ctx.qat`: every weight and activation goes through the quantizer the engine applies
  (tools/train/quant.py, docs/NUMERICS.md) with a straight-through gradient;
- the indexer is fed detached inputs and learns from a KL loss against the main attention's mass
  on the compressed rows (DeepSeek-V3.2 DSA); `Ctx.dense_index` lets attention see every visible
  compressed row (the warm-up), otherwise the indexer's Top-K picks them;
- `Ctx.candidates` turns the candidate pool on (late phase);
- `Ctx.ced_start`: CED / bounded replay simulated: from the candidate source layer up, a query
  at i >= s sees window rows [max(s, i-127), i] only (docs/FORWARD.md "CED prefill");
- the head is the reduced-vocabulary softmax: the rows of the ids the data uses plus one "other"
  class whose logit is h.u + log(V - |S|); exported, every unused row is u, so the engine's
  full softmax is exactly the trained one;
- the MoE reports its per-expert loads (for the sign-rule bias update) and a sequence-wise
  balance loss.
The DSpark stages are in torch_dspark.py (trained by train_dspark.py with this model frozen).
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import quant as Q

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import rope as ref_rope  # noqa: E402


class Ctx:
    """Per-forward switches and what the forward hands back besides the logits."""

    def __init__(self, qat=False, dense_index=True, candidates=False, ced_start=None):
        self.qat = qat
        self.dense_index = dense_index
        self.candidates = candidates
        self.ced_start = ced_start  # long [B] replay start per row, or None (exact)
        self.index_kl = []  # one scalar per index source layer
        self.balance = []  # one scalar per MoE layer
        self.loads = {}  # layer -> float [E] tokens routed to each expert


def _param(*shape, std):
    return nn.Parameter(torch.randn(*shape) * std)


class Linear(nn.Module):
    """kind "fp8" / "fp4": block-scaled weight and FP8 activations under QAT; "bf16": bf16."""

    def __init__(self, n, k, kind, std=None):
        super().__init__()
        self.kind = kind
        self.weight = _param(n, k, std=std if std is not None else k**-0.5)

    def qweight(self, ctx):
        w = self.weight
        if not ctx.qat:
            return w
        if self.kind == "fp8":
            return Q.ste(w, Q.fp8_weight(w))
        if self.kind == "fp4":
            return Q.ste(w, Q.fp4_weight(w))
        return Q.ste(w, Q.bf16_round(w))

    def forward(self, x, ctx):
        if ctx.qat and self.kind in ("fp8", "fp4"):
            x = Q.ste(x, Q.act_quant(x))
        return F.linear(x, self.qweight(ctx))


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x, ctx):
        w = Q.ste(self.weight, Q.bf16_round(self.weight)) if ctx.qat else self.weight
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate(x, cos, sin, inverse=False):
    """Interleaved-pair RoPE on the last axis; cos/sin [T, rd/2] broadcast over [B, T, ..., rd]."""
    shape = [1, cos.shape[0]] + [1] * (x.dim() - 3) + [cos.shape[1], 1]
    c, s = cos.view(shape), sin.view(shape)
    if inverse:
        s = -s
    xp = x.unflatten(-1, (-1, 2))
    swapped = torch.stack([-xp[..., 1], xp[..., 0]], dim=-1)  # (x0, x1) -> (-x1, x0)
    return (xp * c + swapped * s).flatten(-2)


def rope_tail(x, rd, cos, sin, inverse=False):
    return torch.cat([x[..., :-rd], rotate(x[..., -rd:], cos, sin, inverse)], dim=-1)


class Compressor(nn.Module):
    """ref: model.py Compressor: ratio tokens pooled into one latent row (before RoPE)."""

    def __init__(self, args, ratio):
        super().__init__()
        hd = args.head_dim
        self.ratio, self.hd = ratio, hd
        self.wkv = Linear(hd, args.dim, "bf16")
        if ratio > 1:
            self.wgate = Linear(hd, args.dim, "bf16")
        self.norm = RMSNorm(hd, args.norm_eps)

    def forward(self, x, ctx):
        r = self.ratio
        if r == 1:
            return self.norm(self.wkv(x, ctx), ctx)
        B, T, _ = x.shape
        n = T // r
        x = x[:, : n * r]
        kv = self.wkv(x, ctx).view(B, n, r, self.hd)
        w = torch.softmax(self.wgate(x, ctx).view(B, n, r, self.hd), dim=2)
        return self.norm((kv * w).sum(2), ctx)


class Indexer(nn.Module):
    """ref: model.py Indexer. Scores every compressed row per query; learns only from the KL."""

    def __init__(self, args, layer_id):
        super().__init__()
        self.n_heads, self.head_dim, self.rd = args.index_n_heads, args.index_head_dim, args.rope_head_dim
        self.topk = args.index_topk
        self.is_candidate_source = layer_id == args.candidate_source_layer
        self.uses_candidates = 0 <= args.candidate_source_layer < layer_id
        self.topk_blocks, self.block_size = args.candidate_topk_blocks, args.candidate_block_size
        self.wq_b = Linear(self.n_heads * self.head_dim, args.q_lora_rank, "fp8")
        self.weights_proj = Linear(self.n_heads, args.dim, "bf16")
        if layer_id in args.kv_source_layers:
            self.wk = Linear(self.head_dim, args.head_dim, "bf16")
            self.k_norm = RMSNorm(self.head_dim, args.norm_eps)
        self.w_scale = self.head_dim**-0.5 * self.n_heads**-0.5

    def index_keys(self, lat, cos, sin, ctx):
        k = rope_tail(self.k_norm(self.wk(lat, ctx), ctx), self.rd, cos, sin)
        return Q.ste(k, Q.fp4_act_quant(k, 32, "ue8m0")) if ctx.qat else k

    def scores(self, x, qr, index_k, cos, sin, ctx):
        """[B, T, n_rows]: sum over heads of relu(q_h . k) * w_h."""
        B, T, _ = x.shape
        q = self.wq_b(qr, ctx).view(B, T, self.n_heads, self.head_dim)
        q = rope_tail(q, self.rd, cos, sin)
        if ctx.qat:
            q = Q.ste(q, Q.fp4_act_quant(q, 32, "ue8m0"))
        w = self.weights_proj(x, ctx) * self.w_scale  # [B, T, IH]
        s = torch.einsum("bthd,bnd->bthn", q, index_k)
        return (F.relu(s) * w.unsqueeze(-1)).sum(2)


@torch.no_grad()
def candidate_pool(scores, visible, n_vis, topk_blocks, block_size):
    """ref: model.py select_candidate_blocks: the rows of the topk_blocks best blocks (block score =
    its best visible row; the query's newest visible block always wins). bool [B, T, n_rows]."""
    B, T, n = scores.shape
    nb = -(-n // block_size)
    s = torch.where(visible, scores, torch.full_like(scores, -math.inf))
    s = F.pad(s, (0, nb * block_size - n), value=-math.inf)
    bs = s.view(B, T, nb, block_size).amax(-1)
    last = ((n_vis - 1).clamp(min=0) // block_size).view(1, T, 1).expand(B, T, 1)
    has = (n_vis > 0).view(1, T, 1).expand(B, T, 1)
    bs = bs.scatter(2, last, torch.where(has, math.inf, bs.gather(2, last)))
    k = min(topk_blocks, nb)
    val, sel = bs.topk(k, dim=-1)
    keep = torch.zeros(B, T, nb, dtype=torch.bool).scatter(2, sel, val > -math.inf)
    return keep.repeat_interleave(block_size, dim=2)[:, :, :n]


class Attention(nn.Module):
    """ref: model.py Attention: q-LoRA MQA over the window plus the selected compressed rows, with
    the attention sink; grouped low-rank output."""

    def __init__(self, args, layer_id):
        super().__init__()
        self.args, self.layer_id = args, layer_id
        D, H, hd = args.dim, args.n_heads, args.head_dim
        self.H, self.hd, self.rd = H, hd, args.rope_head_dim
        self.G, self.R = args.o_groups, args.o_lora_rank
        self.window = args.window_size
        self.ratio = args.compress_ratios[layer_id]
        self.is_decoder = args.candidate_source_layer >= 0 and layer_id >= args.candidate_source_layer
        self.attn_sink = nn.Parameter(torch.zeros(H))
        self.wq_a = Linear(args.q_lora_rank, D, "fp8")
        self.q_norm = RMSNorm(args.q_lora_rank, args.norm_eps)
        self.wq_b = Linear(H * hd, args.q_lora_rank, "fp8")
        self.wkv = Linear(hd, D, "fp8")
        self.kv_norm = RMSNorm(hd, args.norm_eps)
        self.wo_a = Linear(self.G * self.R, H * hd // self.G, "fp8")
        self.wo_b = Linear(D, self.G * self.R, "fp8")
        self.scale = hd**-0.5
        self.is_kv_source = layer_id in args.kv_source_layers
        self.is_index_source = layer_id in args.index_source_layers
        if self.is_kv_source:
            self.compressor = Compressor(args, self.ratio)
        if self.is_index_source:
            self.indexer = Indexer(args, layer_id)
        if self.ratio:
            theta, orig = args.compress_rope_theta, args.original_seq_len
        else:
            theta, orig = args.rope_theta, 0
        f = ref_rope.precompute_freqs(self.rd, orig, theta, args.rope_factor, args.beta_fast, args.beta_slow)
        self.register_buffer("freqs", torch.from_numpy(np.asarray(f, dtype=np.float32)), persistent=False)

    def cos_sin(self, positions):
        a = positions.float()[:, None] * self.freqs[None, :]
        return torch.cos(a), torch.sin(a)

    def window_logits(self, q, kv, ctx):
        """Banded window attention: queries in blocks of W see the 2W keys of their block and the
        one before. Returns logits [B, T, H, 2W] (-inf outside a query's window, and before the
        CED replay start from the candidate source up) and the key blocks [B, nb, hd, 2W]."""
        B, T, H, hd = q.shape
        W = self.window
        nb = -(-T // W)
        Tp = nb * W
        if Tp != T:
            q = F.pad(q, (0, 0, 0, 0, 0, Tp - T))
        keys = F.pad(kv, (0, 0, W, Tp - T)).unfold(1, 2 * W, W)  # [B, nb, hd, 2W]
        lw = torch.einsum("bnqhd,bndk->bnqhk", q.view(B, nb, W, H, hd), keys) * self.scale
        i = torch.arange(Tp)[:, None]
        j = (i // W) * W - W + torch.arange(2 * W)[None, :]  # absolute key position per slot
        ok = ((j <= i) & (j > i - W) & (j >= 0)).unsqueeze(0)
        if ctx.ced_start is not None and self.is_decoder:
            st = ctx.ced_start.view(-1, 1, 1)
            ok = ok & ~((i >= st) & (j < st))
        lw = lw.reshape(B, Tp, H, 2 * W).masked_fill(~ok.unsqueeze(2), -math.inf)
        return lw[:, :T], keys

    def window_values(self, pw, keys, T):
        B, _, H, K2 = pw.shape
        nb = keys.shape[1]
        W = K2 // 2
        if nb * W != T:
            pw = F.pad(pw, (0, 0, 0, 0, 0, nb * W - T))
        o = torch.einsum("bnqhk,bndk->bnqhd", pw.view(B, nb, W, H, K2), keys)
        return o.reshape(B, nb * W, H, -1)[:, :T]

    def compressed(self, x, qr, state, ctx):
        """(compressed rows [B, n_rows, hd], selection of this layer's index source): the
        selection is ("dense", bool [B, T, n_rows]) or ("sparse", idx [B, T, k], ok [B, T, k])."""
        args, r, layer = self.args, self.ratio, self.layer_id
        B, T, _ = x.shape
        if self.is_kv_source:
            lat = self.compressor(x, ctx)
            n_rows = lat.shape[1]
            cos, sin = self.cos_sin(torch.arange(n_rows) * r)
            # the indexer learns from its KL only: its keys see a detached latent
            state["index_k"][layer] = self.indexer.index_keys(lat.detach(), cos, sin, ctx)
            lat = rope_tail(lat, self.rd, cos, sin)
            state["comp"][layer] = Q.ste(lat, Q.fp4_act_quant(lat, 16, "e4m3")) if ctx.qat else lat
        src = args.kv_source_of[layer]
        comp = state["comp"][src]
        if self.is_index_source:
            index_k = state["index_k"][src]
            n_rows = index_k.shape[1]
            n_vis = (torch.arange(T) + 1) // r
            visible = (torch.arange(n_rows)[None, :] < n_vis[:, None]).unsqueeze(0).expand(B, T, n_rows)
            cos, sin = self.cos_sin(torch.arange(T))
            sc = self.indexer.scores(x.detach(), qr.detach(), index_k, cos, sin, ctx)
            allowed = visible
            if self.indexer.is_candidate_source:
                state["pool"] = candidate_pool(sc.detach(), visible, n_vis, self.indexer.topk_blocks,
                                               self.indexer.block_size)
            elif self.indexer.uses_candidates and ctx.candidates:
                allowed = allowed & state["pool"]
            if ctx.dense_index:
                state["sel"][layer] = ("dense", allowed)
            else:
                state["sel"][layer] = ("sparse",) + topk_rows(sc.detach(), allowed, self.indexer.topk)
            state["scores"][layer] = sc
        return comp, state["sel"][args.index_source_of[layer]]

    def forward(self, x, state, ctx):
        B, T, _ = x.shape
        H, hd, rd = self.H, self.hd, self.rd
        cos, sin = self.cos_sin(torch.arange(T))
        qr = self.q_norm(self.wq_a(x, ctx), ctx)
        q = rope_tail(self.wq_b(qr, ctx).view(B, T, H, hd), rd, cos, sin)
        kv = rope_tail(self.kv_norm(self.wkv(x, ctx), ctx), rd, cos, sin)
        if ctx.qat:
            kv = Q.ste(kv, Q.bf16_round(Q.act_quant(kv)))
        lw, keys = self.window_logits(q, kv, ctx)
        parts = [lw]
        if self.ratio:
            comp, sel = self.compressed(x, qr, state, ctx)
            if sel[0] == "dense":
                lc = torch.einsum("bthd,bnd->bthn", q, comp) * self.scale
                lc = lc.masked_fill(~sel[1].unsqueeze(2), -math.inf)
            else:
                # one GEMM against every row, then the selected k per query (a batch of
                # per-query 4x16 GEMMs is far slower on a CPU)
                gidx = sel[1].unsqueeze(2).expand(B, T, H, sel[1].shape[-1])
                lc = torch.einsum("bthd,bnd->bthn", q, comp).gather(-1, gidx) * self.scale
                lc = lc.masked_fill(~sel[2].unsqueeze(2), -math.inf)
            parts.append(lc)
        # one softmax over window, compressed rows and the sink (a logit with no value)
        sink = self.attn_sink.view(1, 1, H, 1)
        m = torch.maximum(torch.stack([p.amax(-1) for p in parts]).amax(0), sink.squeeze(-1)).detach()
        es = [torch.exp(p - m.unsqueeze(-1)) for p in parts]
        den = sum(e.sum(-1) for e in es) + torch.exp(sink.squeeze(-1) - m)
        ps = [e / den.unsqueeze(-1) for e in es]
        o = self.window_values(ps[0], keys, T)
        if self.ratio:
            if sel[0] == "dense":
                o = o + torch.einsum("bthn,bnd->bthd", ps[1], comp)
            else:
                dense = ps[1].new_zeros(B, T, H, comp.shape[1]).scatter_add(-1, gidx, ps[1])
                o = o + torch.einsum("bthn,bnd->bthd", dense, comp)
            if self.is_index_source:
                self.index_kl(ps[1], sel, state, ctx)
        o = rope_tail(o, rd, cos, sin, inverse=True).reshape(B, T, self.G, -1)
        wo_a = self.wo_a.qweight(ctx).view(self.G, self.R, -1)
        u = torch.einsum("btgk,grk->btgr", o, wo_a).reshape(B, T, self.G * self.R)
        return self.wo_b(u, ctx)

    def index_kl(self, p_comp, sel, state, ctx):
        """KL(main attention's mass on the selected compressed rows || softmax of the index
        scores over the same rows); p_comp [B, T, H, n_rows or k]."""
        sc = state["scores"][self.layer_id]
        if sel[0] == "dense":
            ok = sel[1]
        else:
            ok = sel[2]
            sc = sc.gather(-1, sel[1])
        target = torch.where(ok, p_comp.detach().sum(2), torch.zeros_like(sc))
        tot = target.sum(-1, keepdim=True)
        rows = (tot.squeeze(-1) > 0) & (ok.sum(-1) > 1)
        if not rows.any():
            return
        target = target / tot.clamp(min=1e-30)
        logp = torch.log_softmax(sc.masked_fill(~ok, -math.inf), dim=-1)
        kl = torch.where(target > 0, target * (torch.log(target.clamp(min=1e-30)) - logp),
                         torch.zeros_like(target))
        ctx.index_kl.append(kl.sum(-1)[rows].mean())


def topk_rows(scores, allowed, k):
    """(idx [B, T, kk], ok [B, T, kk]): the min(k, #allowed) best allowed rows per query (idx 0
    where not ok)."""
    kk = min(k, scores.shape[-1])
    val, idx = scores.masked_fill(~allowed, -math.inf).topk(kk, dim=-1)
    ok = val > -math.inf
    return idx.masked_fill(~ok, 0), ok


class Expert(nn.Module):
    """ref: model.py Expert: SwiGLU with the clamps; the routing weight before w2."""

    def __init__(self, args, kind):
        super().__init__()
        D, inter = args.dim, args.moe_inter_dim
        self.w1 = Linear(inter, D, kind)
        self.w2 = Linear(D, inter, kind, std=inter**-0.5 / math.sqrt(2 * args.n_layers))
        self.w3 = Linear(inter, D, kind)
        self.limit = args.swiglu_limit

    def forward(self, x, ctx, weights=None):
        g, u = self.w1(x, ctx), self.w3(x, ctx)
        if self.limit > 0:
            u = u.clamp(-self.limit, self.limit)
            g = g.clamp(max=self.limit)
        a = F.silu(g) * u
        if weights is not None:
            a = weights.unsqueeze(-1) * a
        return self.w2(a, ctx)


class Gate(nn.Module):
    """ref: model.py Gate: sqrtsoftplus scores; the bias (sign rule, no gradient) picks experts."""

    def __init__(self, args):
        super().__init__()
        self.topk = args.n_activated_experts
        self.weight = Linear(args.n_routed_experts, args.dim, "bf16")
        self.register_buffer("bias", torch.zeros(args.n_routed_experts))
        self.route_scale = args.route_scale
        self.norm_topk_prob = args.norm_topk_prob

    def forward(self, x, ctx):
        s = torch.sqrt(F.softplus(self.weight(x, ctx)))
        idx = (s.detach() + self.bias).topk(self.topk, dim=-1).indices
        w = s.gather(-1, idx)
        if self.norm_topk_prob and self.topk > 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return w * self.route_scale, idx, s


class MoE(nn.Module):
    def __init__(self, args, layer_id):
        super().__init__()
        self.layer_id = layer_id
        self.n_experts, self.topk = args.n_routed_experts, args.n_activated_experts
        self.gate = Gate(args)
        self.experts = nn.ModuleList([Expert(args, "fp4") for _ in range(args.n_routed_experts)])
        self.shared_experts = Expert(args, "fp8")

    def routed(self, flat, w, idx, ctx):
        """The routed experts as three batched GEMMs: the (token, slot) pairs grouped by expert
        and padded to the busiest expert's count."""
        N, D = flat.shape
        E, k = self.n_experts, self.topk
        e_of = idx.reshape(-1)
        order = torch.argsort(e_of, stable=True)
        counts = torch.bincount(e_of, minlength=E)
        first = torch.cumsum(counts, 0) - counts
        se = e_of[order]
        st = torch.arange(N).repeat_interleave(k)[order]
        pos = torch.arange(N * k) - first[se]
        C = int(counts.max())
        xin = flat.new_zeros(E, C, D).index_put((se, pos), flat[st])
        wts = flat.new_zeros(E, C).index_put((se, pos), w.reshape(-1)[order])
        ws = [torch.stack([getattr(ex, n).qweight(ctx) for ex in self.experts]) for n in ("w1", "w2", "w3")]
        xq = Q.ste(xin, Q.act_quant(xin)) if ctx.qat else xin
        g, u = torch.bmm(xq, ws[0].transpose(1, 2)), torch.bmm(xq, ws[2].transpose(1, 2))
        lim = self.experts[0].limit
        if lim > 0:
            u = u.clamp(-lim, lim)
            g = g.clamp(max=lim)
        a = F.silu(g) * u * wts.unsqueeze(-1)
        if ctx.qat:
            a = Q.ste(a, Q.act_quant(a))
        out = torch.bmm(a, ws[1].transpose(1, 2))
        return flat.new_zeros(N, D).index_add(0, st, out[se, pos])

    def forward(self, x, ctx):
        B, T, D = x.shape
        w, idx, s = self.gate(x, ctx)
        y = self.routed(x.reshape(-1, D), w, idx, ctx)
        y = y.view(B, T, D) + self.shared_experts(x, ctx)
        # sequence-wise balance loss (DeepSeek-V3): E/(kT) * count_e times the mean normalized score
        onehot = torch.zeros(B, T, self.n_experts).scatter(2, idx, 1.0)
        f = onehot.sum(1) * (self.n_experts / (self.topk * T))
        P = (s / s.sum(-1, keepdim=True)).mean(1)
        ctx.balance.append((f.detach() * P).sum(-1).mean())
        ctx.loads[self.layer_id] = onehot.sum((0, 1)).detach()
        return y


class Engram(nn.Module):
    """ref: model.py Engram: hashed n-gram rows, gated per mHC copy, added to the stream."""

    def __init__(self, args, rows):
        super().__init__()
        D, hc = args.dim, args.hc_mult
        self.dim, self.hc, self.eps = D, hc, args.norm_eps
        n_cols = (args.engram_max_ngram_size - 1) * args.engram_n_heads
        self.embed = nn.Module()
        self.embed.weight = _param(rows, args.engram_head_dim, std=1.0)
        self.wkv = Linear(D * (hc + 1), n_cols * args.engram_head_dim, "fp8", std=(n_cols * args.engram_head_dim) ** -0.5 * 0.1)
        self.q_weight = nn.Parameter(torch.ones(hc, D))
        self.k_weight = nn.Parameter(torch.ones(hc, D))

    def forward(self, h, row_ids, ctx):
        B, T, hc, D = h.shape
        table = self.embed.weight
        if ctx.qat:
            table = Q.ste(table, Q.bf16_round(Q.fp8_rows(table)))
        kv = self.wkv(table[row_ids].reshape(B, T, -1), ctx)
        key, val = kv[..., : hc * D].reshape(B, T, hc, D), kv[..., hc * D :]
        qw, kw = self.q_weight, self.k_weight
        if ctx.qat:
            qw, kw = Q.ste(qw, Q.bf16_round(qw)), Q.ste(kw, Q.bf16_round(kw))
        rstd = torch.rsqrt(h.pow(2).mean(-1) + self.eps) * torch.rsqrt(key.pow(2).mean(-1) + self.eps)
        dot = (h * (qw * kw) * key).sum(-1) * rstd * D**-0.5
        gate = torch.sigmoid(torch.sign(dot) * torch.sqrt(dot.abs().clamp(min=1e-6)))
        return h + gate.unsqueeze(-1) * val.unsqueeze(2)


def sinkhorn_mixes(m, scale, base, hc, iters, eps):
    """ref: kernel.py hc_split_sinkhorn."""
    pre = torch.sigmoid(m[..., :hc] * scale[0] + base[:hc]) + eps
    post = 2 * torch.sigmoid(m[..., hc : 2 * hc] * scale[1] + base[hc : 2 * hc])
    M = (m[..., 2 * hc :] * scale[2] + base[2 * hc :]).unflatten(-1, (hc, hc))
    C = torch.softmax(M, dim=-1) + eps
    C = C / (C.sum(-2, keepdim=True) + eps)
    for _ in range(iters - 1):
        C = C / (C.sum(-1, keepdim=True) + eps)
        C = C / (C.sum(-2, keepdim=True) + eps)
    return pre, post, C


class Block(nn.Module):
    """ref: model.py Block: single-pass mHC around attention and the MoE."""

    attention_cls = Attention  # torch_dspark.DSparkBlock: the stages' window-only attention

    def __init__(self, args, layer_id, engram_rows=None):
        super().__init__()
        D, hc = args.dim, args.hc_mult
        self.hc, self.eps, self.iters, self.hc_eps = hc, args.norm_eps, args.hc_sinkhorn_iters, args.hc_eps
        self.attn = self.attention_cls(args, layer_id)
        self.ffn = MoE(args, layer_id)
        self.attn_norm = RMSNorm(D, args.norm_eps)
        self.ffn_norm = RMSNorm(D, args.norm_eps)
        if engram_rows is not None:
            self.engram = Engram(args, engram_rows)
        mix = (2 + hc) * hc
        for part in ("attn", "ffn"):
            setattr(self, f"hc_{part}_fn", _param(mix, hc * D, std=0.1 * (hc * D) ** -0.5))
            setattr(self, f"hc_{part}_scale", nn.Parameter(torch.ones(3)))
            base = torch.zeros(mix)
            base[2 * hc :] = (4.0 * torch.eye(hc)).flatten()  # comb starts near the identity
            setattr(self, f"hc_{part}_base", nn.Parameter(base))

    def hc_mixes(self, h, part):
        fn, scale, base = (getattr(self, f"hc_{part}_{n}") for n in ("fn", "scale", "base"))
        v = h.flatten(-2)
        m = F.linear(v, fn) * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + self.eps)
        return sinkhorn_mixes(m, scale, base, self.hc, self.iters, self.hc_eps)

    @staticmethod
    def hc_pre(h, pre):
        out = pre[..., 0:1] * h[..., 0, :]
        for i in range(1, h.shape[-2]):
            out = out + pre[..., i : i + 1] * h[..., i, :]
        return out

    @staticmethod
    def hc_post(y, h, post, comb):
        out = post.unsqueeze(-1) * y.unsqueeze(-2)
        for i in range(h.shape[-2]):  # four broadcast products beat a batch of 4x4 GEMMs
            out = out + comb[..., i, :].unsqueeze(-1) * h[..., i : i + 1, :]
        return out

    def forward(self, h, pre_mix, state, ctx):
        residual = h
        attn_pre, attn_post, attn_comb = self.hc_mixes(h, "attn")
        x = self.attn(self.attn_norm(self.hc_pre(h, pre_mix), ctx), state, ctx)
        h = self.hc_post(x, residual, attn_post, attn_comb)
        residual = h
        ffn_pre, ffn_post, ffn_comb = self.hc_mixes(h, "ffn")
        x = self.ffn(self.ffn_norm(self.hc_pre(h, attn_pre), ctx), ctx)
        return self.hc_post(x, residual, ffn_post, ffn_comb), ffn_pre


class Transformer(nn.Module):
    """ref: model.py Transformer, with the reduced-vocabulary embedding and head.

    used_ids: the sorted ids S the data uses; `local` maps a global id to its index in S (ids
    outside S map to the extra embedding row |S|, the "other" embedding)."""

    def __init__(self, args, used_ids, engram_rows):
        super().__init__()
        self.args = args
        D = args.dim
        used = torch.as_tensor(np.asarray(used_ids, dtype=np.int64))
        self.register_buffer("used_ids", used)
        local = torch.full((args.vocab_size,), len(used), dtype=torch.long)
        local[used] = torch.arange(len(used))
        self.register_buffer("local", local, persistent=False)
        self.log_other = math.log(args.vocab_size - len(used))
        bias = torch.zeros(len(used) + 1)
        bias[-1] = self.log_other  # the "other" class stands for V - |S| rows of logit h.u
        self.register_buffer("other_bias", bias, persistent=False)
        self.embed = nn.Module()
        self.embed.weight = _param(len(used) + 1, D, std=1.0)
        self.head = nn.Module()
        self.head.weight = _param(len(used), D, std=D**-0.5)
        self.head_other = nn.Parameter(torch.zeros(D))
        self.norm = RMSNorm(D, args.norm_eps)
        self.layers = nn.ModuleList(
            [Block(args, l, engram_rows.get(l)) for l in range(args.n_layers)]
        )

    def _bf16(self, w, ctx):
        return Q.ste(w, Q.bf16_round(w)) if ctx.qat else w

    def forward(self, ids, hashes, ctx, taps=None):
        """ids long [B, T] (global ids); hashes {layer: long [B, T, cols]} -> logits over S + 1
        (the last column is the "other" class, already carrying log(V - |S|)). `taps`, a list,
        receives the DSpark taps [B, T, n_taps * D]: the mean over the copies of each target
        layer's input (ref: model.py Transformer.forward), bf16 under QAT as the engine's."""
        a = self.args
        B, T = ids.shape
        e = F.embedding(self.local[ids], self._bf16(self.embed.weight, ctx))
        h = e.unsqueeze(2).expand(B, T, a.hc_mult, a.dim)
        pre_mix = torch.zeros(B, T, a.hc_mult)
        pre_mix[..., 0] = 1
        state = {"comp": {}, "index_k": {}, "sel": {}, "scores": {}, "pool": None}
        mains = []
        for l, layer in enumerate(self.layers):
            if hasattr(layer, "engram"):
                h = layer.engram(h, hashes[l], ctx)
            if taps is not None and l in a.dspark_target_layer_ids:
                mains.append(self._bf16(h.mean(2), ctx))
            h, pre_mix = layer(h, pre_mix, state, ctx)
        if mains:
            taps.append(torch.cat(mains, dim=-1))
        x = self.norm(Block.hc_pre(h, pre_mix), ctx)
        w = torch.cat([self.head.weight, self.head_other.unsqueeze(0)])
        return F.linear(x, self._bf16(w, ctx), self.other_bias)

    def targets(self, ids):
        """Global next-token ids -> class indices (|S| for an id outside S)."""
        return self.local[ids]

    @torch.no_grad()
    def update_bias(self, ctx, speed):
        """Aux-loss-free balancing (DeepSeek-V3): bias += speed * sign(mean load - load)."""
        for l, load in ctx.loads.items():
            g = self.layers[l].ffn.gate
            g.bias += speed * torch.sign(load.mean() - load)
