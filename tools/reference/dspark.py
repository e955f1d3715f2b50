"""The DSpark drafter in plain numpy (ref: model.py DSparkAttention, DSparkMarkovHead,
DSparkConfidenceHead, DSparkBlock, Transformer.forward_spec; spec v41-extras §2.4).

One draft cycle after the target processed positions 0..p (p = T - 1 for a prompt of T ids):

* taps: the bf16 mean over the hc copies of the input of every target layer, concatenated in
  layer order (Transformer.forward with taps=...);
* main_x = main_norm(main_proj(taps)) per position (stage 0's weights, shared by every stage);
  each stage's ring holds main_kv = FP8-QDQ(RoPE(kv_norm(wkv(main_x)))) of positions
  max(0, p - window + 1) .. p -- backbone-derived rows only, never draft KV;
* the block: ids [anchor, noise * (block - 1)] at positions p+1 .. p+block, embedded, copied to
  the hc streams, one-hot pre-mix; each stage is a normal Block whose attention lets every draft
  row see all ring rows and all draft rows (no causal mask among the drafts) plus the sink;
* head: collapse with the last stage's FFN pre-mix -> y (bf16), base logits = the target's fp32
  head of mtp.{last}.norm(y); the Markov loop adds M_head . E_markov[x_{k-1}] to row k and picks
  x_k (argmax here: the temperature-0 draft), and the confidence logit is w_conf . [y_k ; e_k].

Arithmetic (docs/NUMERICS.md §D): as the backbone's. The attention list of a draft row is the
ring rows oldest first, then the block's rows in order (cedar's compact layout; the reference
lists ring slots in slot order, which is the same set).
"""

import numpy as np

import numerics as nx
import rope
from checkpoint import CheckpointError
from kernel import FP8Linear, sparse_attn
from model import Attention, Block, RMSNorm
from numerics import F32, bf16


class DSparkAttention(Attention):
    """ref: model.py DSparkAttention: window-only, over the ring of main_kv rows + the block."""

    def main_kv(self, main_x, positions):
        """main_kv rows [n, hd] of main_x [n, D] at `positions` (FP8 QDQ after RoPE)."""
        kv = self.kv_norm(self.wkv(main_x))
        cos, sin = rope.cos_sin(positions, self.freqs)
        kv[:, -self.rd :] = rope.apply_rotary_emb(kv[:, -self.rd :], cos, sin)
        return nx.act_quant_inplace(kv, 32)

    def __call__(self, x, state):
        """x [B, D]: the block's normalised rows at positions p+1 ..; state = (ring, p) with ring
        [n, hd] the main_kv rows of positions p-n+1 .. p, oldest first."""
        ring, p = state
        B, H, hd, rd = x.shape[0], self.H, self.hd, self.rd
        cos, sin = rope.cos_sin(p + 1 + np.arange(B), self.freqs)
        qr = self.q_norm(self.wq_a(x))
        q = self.wq_b(qr).reshape(B, H, hd)
        q[..., -rd:] = rope.apply_rotary_emb(q[..., -rd:], cos, sin)
        kv = self.kv_norm(self.wkv(x))
        kv[:, -rd:] = rope.apply_rotary_emb(kv[:, -rd:], cos, sin)
        kv = nx.act_quant_inplace(kv, 32)
        table = np.concatenate([ring, kv])
        lists = np.broadcast_to(np.arange(table.shape[0]), (B, table.shape[0]))
        o = sparse_attn(q, table, lists, self.attn_sink, self.softmax_scale)
        return self.output(o, cos, sin)


class DSparkBlock(Block):
    """ref: model.py DSparkBlock: a Block under mtp.{s}. with the stage's expert counts."""

    attention_cls = DSparkAttention


class DSpark:
    """The stages plus stage 0's context projection and the last stage's heads."""

    def __init__(self, target):
        args, ck = target.args, target.ck
        self.target = target
        self.args = args
        S, D = args.n_mtp_layers, args.dim
        if S == 0:
            raise CheckpointError("config.json: the model has no DSpark stages")
        n_taps = len(args.dspark_target_layer_ids)
        self.stages = [
            DSparkBlock(args, ck, args.n_layers + s, prefix=f"mtp.{s}.") for s in range(S)
        ]
        self.main_proj = FP8Linear(ck, "mtp.0.main_proj", D, n_taps * D)
        self.main_norm = RMSNorm(ck, "mtp.0.main_norm", D, args.norm_eps)
        last, r, V = f"mtp.{S - 1}.", args.dspark_markov_rank, args.vocab_size
        self.norm = RMSNorm(ck, last + "norm", D, args.norm_eps)
        self.markov_embed = ck.bf16(last + "markov_head.embed.weight", (V, r))
        self.markov_head = ck.bf16(last + "markov_head.head.weight", (V, r))
        self.confidence = ck.bf16(last + "confidence_head.proj.weight", (1, D + r))

    def rings(self, taps, p):
        """Every stage's ring for a draft after position p, from taps [p+1, n_taps*D]."""
        W = self.args.window_size
        first = max(0, p - W + 1)
        main_x = self.main_norm(self.main_proj(taps[first : p + 1]))
        positions = np.arange(first, p + 1)
        return [st.attn.main_kv(main_x, positions) for st in self.stages]

    def draft(self, taps, p, anchor):
        """One cycle: (tokens [block+1] = anchor then the drafts, draft logits fp32 [block, V],
        confidence logits fp32 [block])."""
        args = self.args
        B, hc = args.dspark_block_size, args.hc_mult
        rings = self.rings(taps, p)
        ids = np.full(B, args.dspark_noise_token_id, dtype=np.int64)
        ids[0] = anchor
        e = nx.bf16_from_bits(self.target.embed[ids])
        h = np.repeat(e[:, None, :], hc, axis=1)
        pre = np.zeros((B, hc), dtype=F32)
        pre[:, 0] = 1
        for st, ring in zip(self.stages, rings):
            h, pre = st(h, pre, (ring, p))
        y = Block.hc_pre(h, pre)  # [B, D] bf16, before the norm
        logits = self.target.logits(self.norm(y))
        tokens = [int(anchor)]
        conf = np.empty(B, dtype=F32)
        w_conf = self.confidence[0]
        for k in range(B):
            ek = self.markov_embed[tokens[k]]
            logits[k] = logits[k] + nx.dot_exact(ek[None, :], self.markov_head)[0]
            tokens.append(int(np.argmax(logits[k])))  # the first maximum, as torch.argmax
            conf[k] = nx.dot_exact(np.concatenate([y[k], ek])[None, :], w_conf[None, :])[0, 0]
        return np.array(tokens, dtype=np.int64), logits, conf
