"""The DeepSeek-V4.1 text model in plain numpy, with cedar's pinned reference arithmetic.

Structure mirrors the release's inference/model.py (ModelArgs, RMSNorm, Compressor, Indexer,
select_candidate_blocks, Attention, Gate, Expert, MoE, Block, Transformer); the arithmetic is
docs/NUMERICS.md, step by step. One forward = exact prefill of a whole prompt at positions
0..T-1 (every layer on every row). The per-query semantics (visibility, Top-K size, compact index
lists) are the ones that make chunked prefill and decode compute the same rows.

Arrays: activations are float32 arrays holding bf16 values unless a comment says fp32.
"""

from dataclasses import dataclass, field

import numpy as np

import numerics as nx
import rope
from checkpoint import CheckpointError
from engram import Engram, NgramHash, cached_token_map
from kernel import BF16Linear, FP4Linear, FP8Linear, hc_split_sinkhorn, sparse_attn
from numerics import F32, bf16


@dataclass
class ModelArgs:
    """The text_config keys the forward needs, under the reference's ModelArgs names."""

    vocab_size: int = 0
    dim: int = 0
    moe_inter_dim: int = 0
    n_layers: int = 0
    n_heads: int = 0
    n_routed_experts: int = 0
    n_shared_experts: int = 1
    n_activated_experts: int = 0
    score_func: str = "sqrtsoftplus"
    gate_temp: float = 1.0
    norm_topk_prob: bool = True
    route_scale: float = 1.0
    swiglu_limit: float = 0.0
    q_lora_rank: int = 0
    head_dim: int = 0
    rope_head_dim: int = 0
    norm_eps: float = 1e-20
    o_groups: int = 0
    o_lora_rank: int = 0
    window_size: int = 128
    compress_ratios: tuple = ()
    kv_source_layers: tuple = ()
    index_source_layers: tuple = ()
    compress_rope_theta: float = 160000.0
    original_seq_len: int = 0
    rope_theta: float = 10000.0
    rope_factor: float = 1.0
    beta_fast: float = 32.0
    beta_slow: float = 1.0
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    candidate_source_layer: int = -1
    candidate_topk_blocks: int = 0
    candidate_block_size: int = 0
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    engram_layer_ids: tuple = ()
    engram_num_embeddings: tuple = ()
    engram_max_ngram_size: int = 0
    engram_vocab_size: int = 0
    engram_n_heads: int = 0
    engram_head_dim: int = 0
    engram_pad_token_id: int = 2
    engram_compressed_vocab_size: int = 0
    # DSpark drafter (num_nextn_predict_layers stages under mtp.*; dspark.py)
    n_mtp_layers: int = 0
    dspark_block_size: int = 0
    dspark_noise_token_id: int = 0
    dspark_target_layer_ids: tuple = ()
    dspark_markov_rank: int = 0
    dspark_n_routed_experts: int = 0
    dspark_n_activated_experts: int = 0
    # derived per-layer plan: nearest kv / index source at or below each layer (-1: none)
    kv_source_of: list = field(default_factory=list)
    index_source_of: list = field(default_factory=list)

    @classmethod
    def from_config(cls, text):
        def get(key, default=None, required=True):
            if key in text:
                return text[key]
            if required and default is None:
                raise CheckpointError(f"config.json: text_config is missing key {key!r}")
            return default

        rs = text.get("rope_scaling") or {}
        a = cls(
            vocab_size=int(get("vocab_size")),
            dim=int(get("hidden_size")),
            moe_inter_dim=int(get("moe_intermediate_size")),
            n_layers=int(get("num_hidden_layers")),
            n_heads=int(get("num_attention_heads")),
            n_routed_experts=int(get("n_routed_experts")),
            n_shared_experts=int(get("n_shared_experts", 1)),
            n_activated_experts=int(get("num_experts_per_tok")),
            score_func=str(get("scoring_func", "sqrtsoftplus")),
            gate_temp=float(get("gate_temp", 1.0)),
            norm_topk_prob=bool(get("norm_topk_prob", True)),
            route_scale=float(get("routed_scaling_factor", 1.0)),
            swiglu_limit=float(get("swiglu_limit", 0.0)),
            q_lora_rank=int(get("q_lora_rank")),
            head_dim=int(get("head_dim")),
            rope_head_dim=int(get("qk_rope_head_dim")),
            norm_eps=float(get("rms_norm_eps", 1e-20)),
            o_groups=int(get("o_groups")),
            o_lora_rank=int(get("o_lora_rank")),
            window_size=int(get("sliding_window", 128)),
            compress_ratios=tuple(int(r) for r in get("compress_ratios")),
            kv_source_layers=tuple(int(v) for v in get("kv_source_layer_ids", [])),
            index_source_layers=tuple(int(v) for v in get("index_source_layer_ids", [])),
            compress_rope_theta=float(get("compress_rope_theta", 160000.0)),
            original_seq_len=int(rs.get("original_max_position_embeddings", 0)),
            rope_theta=float(get("rope_theta", 10000.0)),
            rope_factor=float(rs.get("factor", 1.0)),
            beta_fast=float(rs.get("beta_fast", 32)),
            beta_slow=float(rs.get("beta_slow", 1)),
            index_n_heads=int(get("index_n_heads", 0)),
            index_head_dim=int(get("index_head_dim", 0)),
            index_topk=int(get("index_topk", 0)),
            candidate_source_layer=int(get("candidate_source_layer_id", -1)),
            candidate_topk_blocks=int(get("candidate_topk_blocks", 0)),
            candidate_block_size=int(get("candidate_block_size", 0)),
            hc_mult=int(get("hc_mult", 4)),
            hc_sinkhorn_iters=int(get("hc_sinkhorn_iters", 20)),
            hc_eps=float(get("hc_eps", 1e-6)),
            engram_layer_ids=tuple(int(v) for v in get("engram_layer_ids", [])),
            engram_num_embeddings=tuple(int(v) for v in get("engram_num_embeddings", [])),
            engram_max_ngram_size=int(get("engram_max_ngram_size", 0)),
            engram_vocab_size=int(get("engram_vocab_size", 0)),
            engram_n_heads=int(get("engram_n_heads", 0)),
            engram_head_dim=int(get("engram_head_dim", 0)),
            engram_pad_token_id=int(get("engram_pad_token_id", 2)),
            engram_compressed_vocab_size=int(get("engram_compressed_vocab_size", 0)),
            n_mtp_layers=int(get("num_nextn_predict_layers", 0)),
        )
        if a.n_mtp_layers:
            a.dspark_block_size = int(get("dspark_block_size"))
            a.dspark_noise_token_id = int(get("dspark_noise_token_id"))
            a.dspark_target_layer_ids = tuple(int(v) for v in get("dspark_target_layer_ids"))
            a.dspark_markov_rank = int(get("dspark_markov_rank"))
            a.dspark_n_routed_experts = int(get("dspark_n_routed_experts"))
            a.dspark_n_activated_experts = int(get("dspark_num_experts_per_tok"))
        a.validate()
        return a

    def get_moe_config(self, layer_id):
        """ref: ModelArgs.get_moe_config: (routed, activated) experts of a backbone layer or of a
        DSpark stage (layer ids n_layers..)."""
        if layer_id < self.n_layers:
            return self.n_routed_experts, self.n_activated_experts
        return (
            self.dspark_n_routed_experts or self.n_routed_experts,
            self.dspark_n_activated_experts or self.n_activated_experts,
        )

    def ratio(self, layer_id):
        """compress_ratios[layer_id]; DSpark stages are window-only (0)."""
        r = self.compress_ratios
        return r[layer_id] if layer_id < len(r) else 0

    def validate(self):
        def bad(msg):
            raise CheckpointError(f"config.json: {msg}")

        if len(self.compress_ratios) < self.n_layers:
            bad(f"compress_ratios has {len(self.compress_ratios)} entries, need {self.n_layers}")
        if self.score_func != "sqrtsoftplus":
            bad(f"scoring_func {self.score_func!r} not implemented (sqrtsoftplus only)")
        if self.n_shared_experts != 1:
            bad("n_shared_experts must be 1")
        if self.hc_mult <= 0 or self.n_heads % self.o_groups:
            bad("hc_mult / o_groups inconsistent")
        self.kv_source_of, self.index_source_of = [], []
        for l in range(self.n_layers):
            r = self.compress_ratios[l]
            if r not in (0, 1, 2):
                bad(f"compress_ratios[{l}] = {r} not implemented")
            if r == 0:
                if l in self.kv_source_layers or l in self.index_source_layers:
                    bad(f"layer {l} has ratio 0 but is listed as a kv/index source")
                self.kv_source_of.append(-1)
                self.index_source_of.append(-1)
                continue
            ks = max([s for s in self.kv_source_layers if s <= l], default=-1)
            js = max([s for s in self.index_source_layers if s <= l], default=-1)
            if ks < 0 or js < 0:
                bad(f"layer {l} (ratio {r}) has no kv_source / index_source at or below it")
            if self.compress_ratios[ks] != r or self.compress_ratios[js] != r:
                bad(f"layer {l}: ratio {r} differs from its sources {ks}, {js}")
            if l in self.kv_source_layers and l not in self.index_source_layers:
                bad(f"kv_source layer {l} must also be an index source")
            self.kv_source_of.append(ks)
            self.index_source_of.append(js)
        if self.engram_layer_ids:
            if len(self.engram_num_embeddings) != len(self.engram_layer_ids):
                bad("engram_num_embeddings and engram_layer_ids differ in length")
        if self.n_mtp_layers:
            taps = list(self.dspark_target_layer_ids)
            if not taps or taps != sorted(set(taps)) or not 0 <= taps[0] <= taps[-1] < self.n_layers:
                bad("dspark_target_layer_ids must be ascending backbone layers")
            if any(self.ratio(self.n_layers + s) for s in range(self.n_mtp_layers)):
                bad("DSpark stages must have compress ratio 0")


class RMSNorm:
    """ref: model.py RMSNorm (NUMERICS.md §N)."""

    def __init__(self, ck, name, dim, eps):
        self.w = ck.bf16(name + ".weight", (dim,))
        self.eps = F32(eps)

    def __call__(self, x):
        var = nx.mean(x * x)
        r = nx.rsqrt(var + self.eps)
        return bf16(self.w * (x * r[..., None]))


class Compressor:
    """ref: model.py Compressor: pools `ratio` tokens into one latent row (before RoPE).
    Returns the latent rows [n_rows, hd] of the complete groups."""

    def __init__(self, args, ck, p, ratio):
        hd = args.head_dim
        self.hd = hd
        self.ratio = ratio
        self.wkv = BF16Linear(ck, p + "compressor.wkv", hd, args.dim)
        if ratio > 1:
            self.wgate = BF16Linear(ck, p + "compressor.wgate", hd, args.dim)
        self.norm = RMSNorm(ck, p + "compressor.norm", hd, args.norm_eps)

    def __call__(self, x):
        r = self.ratio
        if r == 1:  # one token per row: plain bf16 projection, no gate
            return self.norm(self.wkv(x))
        n = x.shape[0] // r  # a trailing incomplete group is held back
        x = x[: n * r]
        kv = self.wkv.fp32(x).reshape(n, r, self.hd)  # fp32
        z = self.wgate.fp32(x).reshape(n, r, self.hd)
        # channel-wise softmax over the r tokens of a group
        e = nx.exp(z - z.max(axis=1, keepdims=True))
        w = e / nx.xsum(e, axis=1)[:, None, :]
        lat = bf16(nx.xsum(kv * w, axis=1))
        return self.norm(lat)


class Indexer:
    """ref: model.py Indexer: scores compressed rows per query and keeps index_topk of them."""

    def __init__(self, args, ck, p, layer_id):
        self.layer_id = layer_id
        self.ratio = args.compress_ratios[layer_id]
        self.owns_k = layer_id in args.kv_source_layers
        self.is_candidate_source = layer_id == args.candidate_source_layer
        self.uses_candidates = 0 <= args.candidate_source_layer < layer_id
        self.n_heads = args.index_n_heads
        self.head_dim = args.index_head_dim
        self.rd = args.rope_head_dim
        self.topk = args.index_topk
        self.topk_blocks = args.candidate_topk_blocks
        self.block_size = args.candidate_block_size
        self.wq_b = FP8Linear(
            ck, p + "indexer.wq_b", self.n_heads * self.head_dim, args.q_lora_rank
        )
        self.weights_proj = BF16Linear(ck, p + "indexer.weights_proj", self.n_heads, args.dim)
        if self.owns_k:
            self.wk = BF16Linear(ck, p + "indexer.wk", self.head_dim, args.head_dim)
            self.k_norm = RMSNorm(ck, p + "indexer.k_norm", self.head_dim, args.norm_eps)
        # the python double softmax_scale * n_heads**-0.5, rounded to fp32 by torch
        self.w_scale = F32(self.head_dim**-0.5 * self.n_heads**-0.5)

    def index_keys(self, lat, cos, sin):
        """Index keys of the latent rows (pre-RoPE latent): k_norm(wk(lat)), RoPE, FP4."""
        k = self.k_norm(self.wk(lat))
        k[:, -self.rd :] = rope.apply_rotary_emb(k[:, -self.rd :], cos, sin)
        return nx.fp4_act_quant(k, 32, "ue8m0")

    def scores(self, x, qr, index_k, cos, sin):
        """bf16 index scores [T, n_rows] of every query against every row (visibility not
        applied yet). NUMERICS.md §C: every step is rounded to bf16."""
        T = x.shape[0]
        q = self.wq_b(qr).reshape(T, self.n_heads, self.head_dim)
        q[..., -self.rd :] = rope.apply_rotary_emb(q[..., -self.rd :], cos, sin)
        q = nx.fp4_act_quant(q, 32, "ue8m0")
        w = bf16(self.weights_proj(x) * self.w_scale)  # [T, IH]
        total = np.zeros((T, index_k.shape[0]), dtype=np.float64)
        for h in range(self.n_heads):
            sc = bf16(nx.dot_exact(q[:, h], index_k))  # einsum output is bf16
            pr = bf16(np.maximum(sc, F32(0)) * w[:, h : h + 1])  # relu(.) * w, rounded to bf16
            total += pr  # the fp32 sum of a bf16 tensor: exact here, rounded once below
        return bf16(total.astype(F32) + F32(0))


def select_candidate_blocks(scores, n_vis, topk_blocks, block_size):
    """ref: model.py select_candidate_blocks, per query. scores: bf16 [T, n_rows] with invisible
    rows at -inf; n_vis [T]. Returns the pool as a bool mask [T, n_rows]."""
    T, n = scores.shape
    nb = -(-n // block_size)
    padded = np.full((T, nb * block_size), -np.inf, dtype=F32)
    padded[:, :n] = scores
    bs = padded.reshape(T, nb, block_size).max(-1)
    last = (n_vis - 1) // block_size  # the block of the query's newest visible row
    has = n_vis > 0
    bs[np.arange(T)[has], last[has]] = np.inf
    k = min(topk_blocks, nb)
    sel = nx.topk_rule(bs, k)  # [T, k]
    keep = np.zeros((T, nb), dtype=bool)
    vals = np.take_along_axis(bs, sel, axis=1)
    np.put_along_axis(keep, sel, vals > -np.inf, axis=1)
    return np.repeat(keep, block_size, axis=1)[:, :n]


def topk_rows(scores, n_vis, k_max):
    """Per query: the min(k_max, n_vis) best visible rows by the top-k rule, in ascending row
    order, padded with -1 at the end. scores [T, n_rows]; row j is visible iff j < n_vis."""
    T, n = scores.shape
    kk = min(k_max, n)
    out = np.full((T, max(kk, 0)), -1, dtype=np.int64)
    if kk == 0:
        return out
    visible = np.arange(n)[None, :] < n_vis[:, None]
    sel = nx.topk_rule(scores, kk, valid=visible)  # [T, kk], selection order
    k_q = np.minimum(k_max, n_vis)
    keep = np.arange(kk)[None, :] < k_q[:, None]
    big = np.iinfo(np.int64).max
    sel = np.sort(np.where(keep, sel, big), axis=1)
    return np.where(sel == big, -1, sel)


IMAGE_START, IMAGE, IMAGE_NEW_LINE, IMAGE_END = range(4)  # token_types of an image span


def image_token_types(n_h, n_w):
    """ref: image_processor.py: START, (IMAGE x n_w, NEWLINE) x n_h, END."""
    row = [IMAGE] * n_w + [IMAGE_NEW_LINE]
    return np.array([IMAGE_START] + row * n_h + [IMAGE_END], dtype=np.int64)


class SharedState:
    """What sources hand down the stack (ref: model.py SharedAttentionRuntime), by source layer."""

    def __init__(self):
        self.compress_kv = {}  # kv source -> bf16 [n_rows, hd] (FP4-dequantized, RoPE'd)
        self.index_k = {}  # kv source -> bf16 [n_rows, ihd]
        self.topk = {}  # index source -> int [T, k] rows (ascending, -1 padded)
        self.candidates = None  # bool [T, n_rows] pool of the candidate source
        self.image_mask = None  # bool [T]: rows of an image span (token_types >= 0), or None


class Attention:
    """ref: model.py Attention (NUMERICS.md §A, §C)."""

    def __init__(self, args, ck, layer_id, prefix=None):
        p = (prefix or f"layers.{layer_id}.") + "attn."
        self.layer_id = layer_id
        self.args = args
        D, H, hd = args.dim, args.n_heads, args.head_dim
        self.H, self.hd, self.rd = H, hd, args.rope_head_dim
        self.G, self.R = args.o_groups, args.o_lora_rank
        self.window = args.window_size
        self.ratio = args.ratio(layer_id)
        self.attn_sink = ck.f32(p + "attn_sink", (H,))
        self.wq_a = FP8Linear(ck, p + "wq_a", args.q_lora_rank, D)
        self.q_norm = RMSNorm(ck, p + "q_norm", args.q_lora_rank, args.norm_eps)
        self.wq_b = FP8Linear(ck, p + "wq_b", H * hd, args.q_lora_rank)
        self.wkv = FP8Linear(ck, p + "wkv", hd, D)
        self.kv_norm = RMSNorm(ck, p + "kv_norm", hd, args.norm_eps)
        self.wo_a = FP8Linear(ck, p + "wo_a", self.G * self.R, H * hd // self.G)
        self.wo_b = FP8Linear(ck, p + "wo_b", D, self.G * self.R)
        self.softmax_scale = F32(hd**-0.5)
        self.is_kv_source = layer_id in args.kv_source_layers
        self.is_index_source = layer_id in args.index_source_layers
        self.compressor = Compressor(args, ck, p, self.ratio) if self.is_kv_source else None
        self.indexer = Indexer(args, ck, p, layer_id) if self.is_index_source else None
        if self.ratio:
            theta, orig = args.compress_rope_theta, args.original_seq_len
        else:  # pure sliding window: base theta, no YaRN
            theta, orig = args.rope_theta, 0
        self.freqs = rope.precompute_freqs(
            self.rd, orig, theta, args.rope_factor, args.beta_fast, args.beta_slow
        )

    def window_lists(self, T):
        """Window rows max(0, p-win+1) .. p per query, oldest first, -1 padded: [T, min(T,win)]."""
        w = min(T, self.window)
        pos = np.arange(T)[:, None]
        rows = np.maximum(pos - self.window + 1, 0) + np.arange(w)[None, :]
        return np.where(rows <= pos, rows, -1)

    def compressed(self, x, qr, state):
        """The compressed rows (bf16 [n_rows, hd]) and each query's Top-K rows [T, k]."""
        args, r, T = self.args, self.ratio, x.shape[0]
        if self.is_kv_source:
            lat = self.compressor(x)  # [n_rows, hd], pre-RoPE
            n_rows = lat.shape[0]
            cos, sin = rope.cos_sin(np.arange(n_rows) * r, self.freqs)  # row j at position j*r
            # the indexer needs the un-rotated latent, so the index keys come first
            state.index_k[self.layer_id] = self.indexer.index_keys(lat, cos, sin)
            lat[:, -self.rd :] = rope.apply_rotary_emb(lat[:, -self.rd :], cos, sin)
            state.compress_kv[self.layer_id] = nx.fp4_act_quant(lat, 16, "e4m3")
        kv_src = args.kv_source_of[self.layer_id]
        comp = state.compress_kv[kv_src]
        if self.is_index_source:
            index_k = state.index_k[kv_src]
            n_rows = index_k.shape[0]
            n_vis = (np.arange(T) + 1) // r
            if n_rows == 0:
                idxs = np.zeros((T, 0), dtype=np.int64)
            else:
                cos, sin = rope.cos_sin(np.arange(T), self.freqs)
                sc = self.indexer.scores(x, qr, index_k, cos, sin)
                visible = np.arange(n_rows)[None, :] < n_vis[:, None]
                sc = np.where(visible, sc, F32(-np.inf))
                if self.indexer.is_candidate_source:
                    state.candidates = select_candidate_blocks(
                        sc, n_vis, self.indexer.topk_blocks, self.indexer.block_size
                    )
                elif self.indexer.uses_candidates:
                    sc = np.where(state.candidates, sc, F32(-np.inf))
                idxs = topk_rows(sc, n_vis, self.indexer.topk)
            state.topk[self.layer_id] = idxs
        idxs = state.topk[args.index_source_of[self.layer_id]]
        return comp, idxs

    def __call__(self, x, state):
        T = x.shape[0]
        H, hd, rd = self.H, self.hd, self.rd
        cos, sin = rope.cos_sin(np.arange(T), self.freqs)
        qr = self.q_norm(self.wq_a(x))
        q = self.wq_b(qr).reshape(T, H, hd)
        q[..., -rd:] = rope.apply_rotary_emb(q[..., -rd:], cos, sin)
        kv = self.kv_norm(self.wkv(x))
        kv[:, -rd:] = rope.apply_rotary_emb(kv[:, -rd:], cos, sin)
        kv = nx.act_quant_inplace(kv, 32)
        lists = self.window_lists(T)
        table = kv
        if self.ratio:
            comp, idxs = self.compressed(x, qr, state)
            table = np.concatenate([kv, comp])
            lists = np.concatenate([lists, np.where(idxs >= 0, idxs + T, -1)], axis=1)
            # compact layout: drop the -1 slots (window first, then compressed rows, in order)
            order = np.argsort(lists < 0, axis=1, kind="stable")
            lists = np.take_along_axis(lists, order, axis=1)
        o = sparse_attn(q, table, lists, self.attn_sink, self.softmax_scale)
        return self.output(o, cos, sin)

    def output(self, o, cos, sin):
        """Inverse RoPE on the heads' rope dims, then the grouped low-rank output: wo_a is
        block-diagonal over groups (bf16 einsum), wo_b FP8."""
        T, rd = o.shape[0], self.rd
        o[..., -rd:] = rope.apply_rotary_emb(o[..., -rd:], cos, sin, inverse=True)
        o = o.reshape(T, self.G, -1)
        wo_a = self.wo_a_bf16().reshape(self.G, self.R, -1)
        u = np.empty((T, self.G, self.R), dtype=F32)
        for g in range(self.G):
            u[:, g] = bf16(nx.dot_exact(o[:, g], wo_a[g]))
        return self.wo_b(u.reshape(T, self.G * self.R))

    def wo_a_bf16(self):
        if not hasattr(self, "_wo_a"):
            self._wo_a = self.wo_a.dequant_bf16()
        return self._wo_a


class Gate:
    """ref: model.py Gate (sqrtsoftplus; the bias picks experts, weights from raw scores)."""

    def __init__(self, args, ck, p, n_experts, topk):
        E = n_experts
        self.topk = topk
        self.weight = BF16Linear(ck, p + "gate", E, args.dim)
        self.bias = ck.f32(p + "gate.bias", (E,))
        self.bias_vl = ck.f32(p + "gate.bias_vl", (E,)) if ck.has(p + "gate.bias_vl") else None
        self.gate_temp = F32(args.gate_temp)
        self.norm_topk_prob = args.norm_topk_prob
        self.route_scale = F32(args.route_scale)

    def __call__(self, x, image_mask=None):
        logits = self.weight.fp32(x)  # F.linear(x.float(), W.float())
        if self.gate_temp != F32(1):
            logits = logits / self.gate_temp
        s = nx.sqrt(nx.softplus(logits))
        bias = self.bias[None, :]
        if image_mask is not None and image_mask.any():  # image-span rows select with bias_vl
            bias = np.where(image_mask[:, None], self.bias_vl[None, :], bias)
        idx = nx.topk_rule(s + bias, self.topk)
        w = np.take_along_axis(s, idx, axis=1)
        if self.norm_topk_prob and self.topk > 1:
            w = w / (nx.xsum(w)[:, None] + F32(1e-20))
        w = w * self.route_scale
        return w, idx


class Expert:
    """ref: model.py Expert: SwiGLU with the training clamps; routing weight before w2."""

    def __init__(self, args, ck, p, fp4):
        D, I = args.dim, args.moe_inter_dim
        L = FP4Linear if fp4 else FP8Linear
        self.w1 = L(ck, p + "w1", I, D)
        self.w2 = L(ck, p + "w2", D, I)
        self.w3 = L(ck, p + "w3", I, D)
        self.limit = F32(args.swiglu_limit)

    def __call__(self, x, weights=None):
        g = self.w1(x)
        u = self.w3(x)
        if self.limit > 0:
            u = np.clip(u, -self.limit, self.limit)
            g = np.minimum(g, self.limit)
        a = nx.silu(g) * u
        if weights is not None:
            a = weights[:, None] * a
        return self.w2(bf16(a))


class MoE:
    """ref: model.py MoE: routed experts added in ascending expert index, then the shared one."""

    def __init__(self, args, ck, layer_id, prefix=None):
        p = (prefix or f"layers.{layer_id}.") + "ffn."
        E, K = args.get_moe_config(layer_id)
        self.gate = Gate(args, ck, p, E, K)
        self.experts = [Expert(args, ck, f"{p}experts.{e}.", True) for e in range(E)]
        self.shared = Expert(args, ck, p + "shared_experts.", False)

    def __call__(self, x, image_mask=None):
        w, idx = self.gate(x, image_mask)
        y = np.zeros(x.shape, dtype=F32)
        for e, expert in enumerate(self.experts):
            tok, slot = np.nonzero(idx == e)
            if tok.size:
                y[tok] = y[tok] + expert(x[tok], w[tok, slot])
        y = y + self.shared(x)
        return bf16(y)


class Block:
    """ref: model.py Block: single-pass mHC around attention and MoE (NUMERICS.md §B)."""

    attention_cls = Attention

    def __init__(self, args, ck, layer_id, engram=None, prefix=None):
        p = prefix or f"layers.{layer_id}."
        D, hc = args.dim, args.hc_mult
        self.layer_id = layer_id
        self.hc = hc
        self.eps = F32(args.norm_eps)
        self.iters = args.hc_sinkhorn_iters
        self.hc_eps = args.hc_eps
        self.engram = engram
        self.attn = self.attention_cls(args, ck, layer_id, p)
        self.ffn = MoE(args, ck, layer_id, p)
        self.attn_norm = RMSNorm(ck, p + "attn_norm", D, args.norm_eps)
        self.ffn_norm = RMSNorm(ck, p + "ffn_norm", D, args.norm_eps)
        mix = (2 + hc) * hc
        self.hc_attn = (
            ck.f32(p + "hc_attn_fn", (mix, hc * D)),
            ck.f32(p + "hc_attn_scale", (3,)),
            ck.f32(p + "hc_attn_base", (mix,)),
        )
        self.hc_ffn = (
            ck.f32(p + "hc_ffn_fn", (mix, hc * D)),
            ck.f32(p + "hc_ffn_scale", (3,)),
            ck.f32(p + "hc_ffn_base", (mix,)),
        )

    def hc_mixes(self, h, fn, scale, base):
        """ref: Block.hc_mixes: one rms statistic over the flattened copies, fn . v (exact
        products, exact sum: canonical rule 1), then hc_split_sinkhorn."""
        v = h.reshape(h.shape[0], -1)
        r = nx.rsqrt(nx.mean(v * v) + self.eps)
        m = nx.dot_exact(v, fn) * r[:, None]
        return hc_split_sinkhorn(m, scale, base, self.hc, self.iters, self.hc_eps)

    @staticmethod
    def hc_pre(h, pre):
        """ref: Block.hc_pre: bf16(exact sum over copies of fp32(pre[c] * h[c]))."""
        return bf16(nx.xsum(pre[:, :, None] * h, axis=1))

    @staticmethod
    def hc_post(y, h, post, comb):
        """ref: Block.hc_post: out[j] = bf16(post[j]*y + exact sum_i fp32(comb[i][j] * h[i]))."""
        mixed = nx.xsum(comb[:, :, :, None] * h[:, :, None, :], axis=1)  # [T, j, D]
        return bf16(post[:, :, None] * y[:, None, :] + mixed)

    def __call__(self, h, pre_mix, state):
        residual = h
        attn_pre, attn_post, attn_comb = self.hc_mixes(h, *self.hc_attn)
        x = self.attn_norm(self.hc_pre(h, pre_mix))
        x = self.attn(x, state)
        h = self.hc_post(x, residual, attn_post, attn_comb)
        residual = h
        ffn_pre, ffn_post, ffn_comb = self.hc_mixes(h, *self.hc_ffn)
        x = self.ffn_norm(self.hc_pre(h, attn_pre))
        x = self.ffn(x, getattr(state, "image_mask", None))
        h = self.hc_post(x, residual, ffn_post, ffn_comb)
        return h, ffn_pre


class Transformer:
    """ref: model.py Transformer.forward: embed -> hc copies -> (Engram, Block)* -> collapse ->
    norm -> fp32 head, for every position."""

    def __init__(self, args, ck, tokenizer_json=None):
        self.args = args
        self.ck = ck
        D, V = args.dim, args.vocab_size
        self.embed = ck._get("embed.weight", "BF16", (V, D))  # raw bf16 bits, gathered lazily
        self.norm = RMSNorm(ck, "norm", D, args.norm_eps)
        self.head = ck._get("head.weight", "BF16", (V, D))
        self.hash = None
        if args.engram_layer_ids:
            if tokenizer_json is None:
                raise CheckpointError("model has Engram layers but no tokenizer.json")
            token_map, n = cached_token_map(tokenizer_json)
            self.hash = NgramHash(args, token_map, n)
        self.layers = []
        for l in range(args.n_layers):
            eng = None
            if l in args.engram_layer_ids:
                eng = Engram(args, ck, l, args.engram_layer_ids.index(l))
            self.layers.append(Block(args, ck, l, eng))

    def image_embed(self, e, images):
        """ref: model.py Transformer.forward (vision): each image span [START, (IMAGE x n_w,
        NEWLINE) x n_h, END] overwrites the embedding rows from its first position with the
        learned delimiters and the aligner rows in reading order. images: a list of
        (first_pos, n_h, n_w, rows [n_h * n_w, D]). Returns the token_types [T] (-1: text)."""
        T, D = e.shape
        types = np.full(T, -1, dtype=np.int64)
        if not images:
            return types
        start, end, newline = (self.ck.bf16(k, (D,)) for k in ("image_start", "image_end",
                                                                 "image_newline"))
        for p0, n_h, n_w, rows in images:
            span = image_token_types(n_h, n_w)
            if p0 < 0 or p0 + len(span) > T or (types[p0:p0 + len(span)] >= 0).any():
                raise CheckpointError(f"image span at {p0} does not fit the prompt")
            types[p0:p0 + len(span)] = span
            e[p0] = start
            e[p0 + len(span) - 1] = end
            k = 0
            for i, t in enumerate(span[1:-1], start=p0 + 1):
                if t == IMAGE_NEW_LINE:
                    e[i] = newline
                else:
                    e[i] = rows[k]
                    k += 1
        return types

    def forward(self, ids, progress=None, taps=None, images=None):
        """ids int [T] -> fp32 logits [T, vocab] of every position. `taps`, a list, receives the
        DSpark target taps main_hidden [T, n_taps * D] (ref: Transformer.forward main_hiddens:
        the mean over the copies of each target layer's input, bf16, concatenated in layer
        order). `images`: the image spans of the prompt (image_embed); their rows route with
        the routers' bias_vl and are DEAD for Engram (no n-gram spans them, their gate is 0)."""
        args = self.args
        ids = np.asarray(ids, dtype=np.int64)
        T = ids.shape[0]
        e = nx.bf16_from_bits(self.embed[ids])  # [T, D]
        types = self.image_embed(e, images)
        image_mask = types >= 0 if (types >= 0).any() else None
        h = np.repeat(e[:, None, :], args.hc_mult, axis=1)
        pre_mix = np.zeros((T, args.hc_mult), dtype=F32)
        pre_mix[:, 0] = 1
        hashes = self.hash(ids, image_mask) if self.hash is not None else None
        state = SharedState()
        state.image_mask = image_mask
        main_hiddens = []
        for l, layer in enumerate(self.layers):
            if layer.engram is not None:
                h = layer.engram(h, hashes[layer.engram.layer_hash_index], image_mask)
            if l in args.dspark_target_layer_ids:  # the attention input, not the output
                main_hiddens.append(bf16(nx.mean(h, axis=1)))
            h, pre_mix = layer(h, pre_mix, state)
            if progress:
                progress(l)
        if taps is not None and main_hiddens:
            taps.append(np.concatenate(main_hiddens, axis=1))
        x = self.norm(Block.hc_pre(h, pre_mix))
        return self.logits(x)

    def logits(self, x, chunk=4096):
        """logits = exact dot(x, head[v]) in fp32 for every vocab row (head promoted to fp32)."""
        T = x.shape[0]
        V = self.head.shape[0]
        out = np.empty((T, V), dtype=F32)
        x64 = x.astype(np.float64)
        for v0 in range(0, V, chunk):
            w = nx.bf16_from_bits(self.head[v0 : v0 + chunk]).astype(np.float64)
            out[:, v0 : v0 + chunk] = (x64 @ w.T).astype(F32)
        return out + F32(0)
