"""The vision tower (v41-extras.md §3.2-3.3): DeepSeek-ViT and the 3x3 aligner, the oracle of
`cedar image --embed` (docs/VISION.md "Arithmetic").

Written from the structure of the release's `inference/vision.py` (ViT, Block, Attention, MLP,
RMSNorm, Aligner, get_vision_cos_sin, apply_rotary) and cedar's canonical arithmetic:

* a Linear with bias is bf16(fp32(exact dot) + bias), the bias added in fp32 as an
  fp32-accumulating BLAS with a bias epilogue does; without bias bf16(exact dot);
* 2D RoPE angles fp32(fp32(row or column) * inv_freq), cos/sin correctly rounded, the
  rotate-half products and sums each rounded to fp32, the result to bf16;
* attention per head and query: scores fp32(exact q.k) * fp32(1/sqrt(head_dim)), the softmax
  exp(s - max) correctly rounded, its denominator an exact sum, probabilities fp32(e / den)
  materialised, the output bf16(exact sum p * v);
* silu and the exact-erf gelu evaluated in double, rounded to fp32 then bf16 (torch computes
  them in fp32 on a bf16 tensor); the SwiGLU product and the residual adds in fp32, then bf16.

    /usr/bin/python3 tools/reference/vision.py --model DIR --image F --out ROWS.npy
        # ROWS: float32 [n_llm_h * n_llm_w, dim], the aligner's rows in reading order
"""

import argparse
import json
import math
import sys

import numpy as np

import image_processor as ip
import numerics as nx
from checkpoint import Checkpoint, CheckpointError
from numerics import F32, F64, bf16, bf16_from_bits
from rope import precompute_freqs

CHUNK = 512  # queries per attention step (bounds the [chunk, n] score matrices)


class VisionArgs:
    """vision_config of config.json (the shape keys are required, as in the engine)."""

    def __init__(self, cfg, dim):
        v = cfg.get("vision_config")
        if not isinstance(v, dict):
            raise CheckpointError("config.json: no vision_config (the model has no vision tower)")
        for k in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                  "intermediate_size", "patch_size", "downsample_ratio"):
            if not isinstance(v.get(k), int) or v[k] <= 0:
                raise CheckpointError(f"config.json: vision_config.{k} missing or not positive")
        self.n_layers = v["num_hidden_layers"]
        self.dim = v["hidden_size"]
        self.n_heads = v["num_attention_heads"]
        self.inter_dim = v["intermediate_size"]
        self.patch = v["patch_size"]
        self.ratio = v["downsample_ratio"]
        self.rope_theta = float(v.get("rope_theta", 10000.0))
        self.head_dim = self.dim // self.n_heads
        self.text_dim = dim
        self.geometry = ip.Geometry(patch=self.patch, downsample=self.ratio,
                                    max_tokens=v.get("max_image_tokens", 1024),
                                    min_pixels=v.get("min_pixels", 295936),
                                    max_wh_ratio=v.get("max_wh_ratio"))


def rms_norm(x, w, eps=F32(1e-6)):
    """ref: vision.py RMSNorm (the text model's arithmetic, NUMERICS.md §N)."""
    r = nx.rsqrt(nx.mean(x * x) + eps)
    return bf16(w * (x * r[..., None]))


class Linear:
    """ref: nn.Linear in bf16."""

    def __init__(self, ck, name, n, k, bias=True):
        self.w = ck.bf16(name + ".weight", (n, k))
        self.b = ck.bf16(name + ".bias", (n,)) if bias else None

    def __call__(self, x):
        y = nx.dot_exact(x, self.w)
        return bf16(y + self.b if self.b is not None else y)


def cos_sin(n_h, n_w, rope_dim, theta):
    """ref: get_vision_cos_sin -> fp32 [n_h * n_w, rope_dim]: the first half of the angles from
    the patch's row, the second half from its column."""
    inv = precompute_freqs(rope_dim, 0, theta, 1.0, 0, 0)
    rows = np.repeat(np.arange(n_h), n_w).astype(F32)
    cols = np.tile(np.arange(n_w), n_h).astype(F32)
    a = np.concatenate([rows[:, None] * inv[None, :], cols[:, None] * inv[None, :]], axis=1)
    return nx.cos(a), nx.sin(a)


def apply_rotary(x, cos, sin):
    """ref: apply_rotary (rotate-half over the whole head). x [n, H, hd] bf16; cos/sin [n, hd/2]."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[:, None, :], sin[:, None, :]
    return bf16(np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1))


def attention_head(q, k, v, scale):
    """Bidirectional softmax attention of one head: q, k, v [n, hd] bf16 -> [n, hd] bf16."""
    out = np.empty_like(q)
    for a in range(0, q.shape[0], CHUNK):
        s = nx.dot_exact(q[a:a + CHUNK], k) * scale
        e = nx.exp(s - s.max(axis=1, keepdims=True))
        p = e / nx.xsum(e)[:, None]
        out[a:a + CHUNK] = bf16(nx.dot_exact(p, v.T))
    return out


class Block:
    """ref: vision.py Block (pre-norm attention and SwiGLU MLP)."""

    def __init__(self, ck, a, i):
        p = f"vision.blocks.{i}."
        V = a.dim
        self.a = a
        self.norm1 = ck.bf16(p + "norm1.weight", (V,))
        self.norm2 = ck.bf16(p + "norm2.weight", (V,))
        self.wqkv = Linear(ck, p + "attn.wqkv", 3 * V, V)
        self.wo = Linear(ck, p + "attn.wo", V, V)
        self.w1 = Linear(ck, p + "mlp.w1", 2 * a.inter_dim, V, bias=False)
        self.w2 = Linear(ck, p + "mlp.w2", V, a.inter_dim, bias=False)

    def attn(self, x, cos, sin):
        a, n = self.a, x.shape[0]
        qkv = self.wqkv(x)
        q, k, v = (qkv[:, j * a.dim:(j + 1) * a.dim].reshape(n, a.n_heads, a.head_dim)
                   for j in range(3))
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        scale = F32(1.0 / math.sqrt(a.head_dim))
        o = np.stack([attention_head(q[:, h], k[:, h], v[:, h], scale)
                      for h in range(a.n_heads)], axis=1)
        return self.wo(o.reshape(n, a.dim))

    def mlp(self, x):
        gu = self.w1(x)
        gate, up = gu[:, :self.a.inter_dim], gu[:, self.a.inter_dim:]
        return self.w2(bf16(bf16(nx.silu(gate)) * up))

    def __call__(self, x, cos, sin):
        x = bf16(x + self.attn(rms_norm(x, self.norm1), cos, sin))
        return bf16(x + self.mlp(rms_norm(x, self.norm2)))


def gelu(x):
    """exact-erf GELU evaluated in double, rounded to fp32."""
    d = np.asarray(x, dtype=F32).astype(F64)
    erf = np.vectorize(math.erf, otypes=[F64])
    return (0.5 * d * (1.0 + erf(d * (1.0 / math.sqrt(2.0))))).astype(F32)


class VisionTower:
    """ref: vision.py ViT + Aligner: patches -> the image's rows in the text model's width."""

    def __init__(self, ck, a):
        V, P, r = a.dim, 3 * a.patch * a.patch, a.ratio
        self.a = a
        self.patch_embed = Linear(ck, "vision.patch_embed.proj", V, P)
        self.blocks = [Block(ck, a, i) for i in range(a.n_layers)]
        self.norm = ck.bf16("vision.norm.weight", (V,))
        self.w1 = Linear(ck, "aligner.w1", a.text_dim, V * r * r)
        self.w2 = Linear(ck, "aligner.w2", a.text_dim, a.text_dim)

    def vit(self, patches, n_h, n_w):
        x = self.patch_embed(patches)
        cos, sin = cos_sin(n_h, n_w, self.a.head_dim // 2, self.a.rope_theta)
        for b in self.blocks:
            x = b(x, cos, sin)
        return rms_norm(x, self.norm)

    def aligner(self, x, n_h, n_w):
        """3x3 pixel unshuffle (zero padding right/bottom; index c*r*r + ky*r + kx), then the
        two-layer MLP."""
        r, V = self.a.ratio, self.a.dim
        H, W = -(-n_h // r) * r, -(-n_w // r) * r
        g = np.zeros((H, W, V), dtype=F32)
        g[:n_h, :n_w] = x.reshape(n_h, n_w, V)
        u = g.reshape(H // r, r, W // r, r, V).transpose(0, 2, 4, 1, 3)
        u = u.reshape((H // r) * (W // r), V * r * r)
        return self.w2(bf16(gelu(self.w1(u))))

    def __call__(self, patches, n_h, n_w):
        return self.aligner(self.vit(patches, n_h, n_w), n_h, n_w)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    try:
        with open(f"{a.model}/config.json") as f:
            cfg = json.load(f)
        text = cfg.get("text_config", cfg)
        args = VisionArgs(cfg, text["hidden_size"])
        tower = VisionTower(Checkpoint(a.model), args)
        plan, _, bits = ip.process(a.image, args.geometry)
    except (OSError, ValueError, KeyError, CheckpointError) as e:
        print(f"vision.py: error: {e}", file=sys.stderr)
        return 1
    rows = tower(bf16_from_bits(bits), plan["n_vit_h"], plan["n_vit_w"])
    assert rows.shape[0] == plan["n_llm_h"] * plan["n_llm_w"]
    np.save(a.out, rows.astype(F32))
    print(json.dumps(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
