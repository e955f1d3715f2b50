"""Rotary embedding tables and the interleaved-pair rotation (docs/NUMERICS.md §P).

ref: model.py precompute_freqs_cis / apply_rotary_emb. The frequency table is computed the way
torch computes it in fp32 (pow correctly rounded, fp32 division, the YaRN blend step by step);
angles are fp32(fp32(p) * freq), cos/sin correctly rounded to fp32.
"""

import math

import numpy as np

import numerics as nx
from numerics import F32


def precompute_freqs(dim, original_seq_len, base, factor, beta_fast, beta_slow):
    """ref: model.py precompute_freqs_cis (the frequency part). Returns fp32 [dim/2]."""
    k = np.arange(0, dim, 2, dtype=F32)
    e = k / F32(dim)  # fp32 division
    freqs = F32(1.0) / nx.pow_(F32(base), e)
    if original_seq_len > 0:

        def corrected_dim(rotations):
            turns = original_seq_len / (rotations * 2 * math.pi)
            return dim * math.log(turns) / (2 * math.log(base))

        low = max(math.floor(corrected_dim(beta_fast)), 0)
        high = min(math.ceil(corrected_dim(beta_slow)), dim - 1)
        ramp = (np.arange(dim // 2, dtype=F32) - F32(low)) / F32(max(high - low, 1e-3))
        ramp = np.clip(ramp, F32(0), F32(1))
        smooth = F32(1) - ramp
        freqs = (freqs / F32(factor)) * (F32(1) - smooth) + freqs * smooth
    return freqs.astype(F32)


def cos_sin(positions, freqs):
    """fp32 cos/sin tables [T, dim/2] for absolute positions."""
    a = np.asarray(positions).astype(F32)[:, None] * freqs[None, :]
    return nx.cos(a), nx.sin(a)


def apply_rotary_emb(x, cos, sin, inverse=False):
    """Rotate the adjacent pairs of x (bf16 values [T, ..., rd]) by the per-row angle tables
    [T, rd/2]; returns bf16. inverse conjugates the rotation (s -> -s)."""
    shp = x.shape
    extra = (1,) * (x.ndim - 2)
    c = cos.reshape(shp[0], *extra, cos.shape[-1])
    s = sin.reshape(shp[0], *extra, sin.shape[-1])
    if inverse:
        s = -s
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    y = np.empty(shp, dtype=F32)
    y[..., 0::2] = x0 * c - x1 * s  # complex64 product: real = ac - bd
    y[..., 1::2] = x0 * s + x1 * c  # imag = ad + bc
    return nx.bf16(y)
