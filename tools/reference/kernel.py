"""The kernels of the release's kernel.py, in plain numpy with the pinned arithmetic:
block-scaled FP8/FP4 GEMMs (docs/NUMERICS.md §G), sparse_attn (§A) and hc_split_sinkhorn (§B).
Also the weight holders that pick the GEMM from the checkpoint dtype (ref: model.py linear).
"""

import numpy as np

import numerics as nx
from numerics import F32, F64, bf16

SPARSE_ATTN_BLOCK = 64


def block_scaled_gemm(q, sx, wb, sw, block=32):
    """sum over K blocks, in K order, of fp32(exact block dot) * sx[:, k] * sw[:, k], accumulated
    in fp32 (kernel.py fp8_gemm/fp4_gemm). q [T, K] holds E4M3 values, wb the weight's E4M3/E2M1
    values pre-blocked as float64 [K/32, 32, N] (block products are exact, and so is the float64
    sum of 32 of them); sx [T, K/32] and sw [N, K/32] are powers of two. Returns fp32 [T, N]."""
    T, K = q.shape
    nk, _, N = wb.shape
    acc = np.zeros((T, N), dtype=F32)
    rows = max(1, (1 << 24) // max(1, nk * N))  # bound the float64 partials to ~128 MiB
    for t0 in range(0, T, rows):
        t1 = min(T, t0 + rows)
        qb = q[t0:t1].astype(F64).reshape(t1 - t0, nk, block).transpose(1, 0, 2)
        p = np.matmul(qb, wb).astype(F32)  # [nk, t, N], each exact
        a = acc[t0:t1]
        for k in range(nk):
            a = a + (p[k] * sx[t0:t1, k : k + 1]) * sw[None, :, k]
        acc[t0:t1] = a
    return acc


def _blocked(w, block=32):
    """[N, K] weight values -> float64 [K/32, 32, N] for block_scaled_gemm."""
    n, k = w.shape
    return np.ascontiguousarray(w.astype(F64).reshape(n, k // block, block).transpose(1, 2, 0))


class FP8Linear:
    """FP8 E4M3 weight [N, K] with a UE8M0 scale per 32x32 block (ref: model.py Linear, fp8)."""

    def __init__(self, ck, name, n, k):
        w, s = ck.fp8(name, (n, k))
        self.name = name
        self.n, self.k = n, k
        self._w_raw, self._s_raw = w, s
        self._w = None

    def _load(self):
        if self._w is None:
            self._w = nx.e4m3_decode(self._w_raw)
            self._wb = _blocked(self._w)
            s = nx.ue8m0_decode(self._s_raw)  # [ceil(N/32), K/32]
            self._sw = np.repeat(s, 32, axis=0)[: self.n]  # per output row
        return self._wb, self._sw

    def dequant_bf16(self):
        """value * scale, exact in bf16 (used for wo_a, which convert.py turns into bf16)."""
        self._load()
        w, sw = self._w, self._sw
        full = w.reshape(self.n, self.k // 32, 32) * sw[:, :, None]
        return bf16(full.reshape(self.n, self.k))

    def __call__(self, x):
        """x: bf16 values [..., K] -> bf16 [..., N] (ref: kernel.py act_quant + fp8_gemm)."""
        w, sw = self._load()
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        q, sx = nx.act_quant(x2, 32)
        return bf16(block_scaled_gemm(q, sx, w, sw)).reshape(*shp[:-1], self.n)


class FP4Linear:
    """Routed-expert weight: packed E2M1 [N, K/2] + UE8M0 scale per (row, 32 K) (ref: fp4_gemm)."""

    def __init__(self, ck, name, n, k):
        w, s = ck.fp4(name, (n, k))
        self.n, self.k = n, k
        self._w_raw, self._s_raw = w, s
        self._w = None

    def _load(self):
        if self._w is None:
            self._w = _blocked(nx.unpack_fp4(self._w_raw))
            self._sw = nx.ue8m0_decode(self._s_raw)
        return self._w, self._sw

    def __call__(self, x):
        w, sw = self._load()
        shp = x.shape
        x2 = x.reshape(-1, shp[-1])
        q, sx = nx.act_quant(x2, 32)
        return bf16(block_scaled_gemm(q, sx, w, sw)).reshape(*shp[:-1], self.n)


class BF16Linear:
    """F.linear in bf16: bf16(exact dot) (ref: model.py linear, bf16 weight)."""

    def __init__(self, ck, name, n, k):
        self.w = ck.bf16(name + ".weight", (n, k))
        self.n, self.k = n, k

    def __call__(self, x):
        shp = x.shape
        y = nx.dot_exact(x.reshape(-1, shp[-1]), self.w)
        return bf16(y).reshape(*shp[:-1], self.n)

    def fp32(self, x):
        """F.linear(x.float(), W.float()): the exact dot kept in fp32 (router, ratio-2
        compressor)."""
        shp = x.shape
        return nx.dot_exact(x.reshape(-1, shp[-1]), self.w).reshape(*shp[:-1], self.n)


def sparse_attn(q, kv, lists, sink, scale, chunk=128):
    """ref: kernel.py sparse_attn (NUMERICS.md §A).

    q: bf16 [T, H, d]; kv: bf16 [R, d] (K = V rows); lists: int [T, L] rows of kv per query in
    list order, padded with -1 at the end; sink: fp32 [H]; scale: fp32. Returns bf16 [T, H, d].
    Trailing -1 padding is exact: an all-invalid block leaves (mx, den, acc) unchanged, and
    invalid entries inside a block add p = 0 terms to exact sums.
    """
    T, H, d = q.shape
    L = lists.shape[1]
    kv64 = np.concatenate([kv, np.zeros((1, d), F32)]).astype(F64)  # last row: the pad target
    pad_row = kv.shape[0]
    out = np.empty((T, H, d), dtype=F32)
    scale = F32(scale)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        qc = q[t0:t1].astype(F64)
        n = t1 - t0
        acc = np.zeros((n, H, d), F32)
        den = np.zeros((n, H), F32)
        mx = np.full((n, H), F32(-1e30), F32)
        for b in range(0, L, SPARSE_ATTN_BLOCK):
            idx = lists[t0:t1, b : b + SPARSE_ATTN_BLOCK]
            valid = idx >= 0
            if not valid.any():
                break  # padding sits at the end of every list
            kb = kv64[np.where(valid, idx, pad_row)]  # [n, blk, d]
            s = (qc @ kb.transpose(0, 2, 1)).astype(F32) * scale  # [n, H, blk]
            s = np.where(valid[:, None, :], s, F32(-np.inf))
            mnew = np.maximum(mx, s.max(-1))
            alpha = nx.exp(mx - mnew)
            p = nx.exp(s - mnew[..., None])
            den = den * alpha + nx.xsum(p)
            pv = (bf16(p).astype(F64) @ kb).astype(F32)  # exact products, exact sum
            acc = acc * alpha[..., None] + pv
            mx = mnew
        den = den + nx.exp(sink[None, :] - mx)
        out[t0:t1] = bf16(acc / den[..., None])
    return out


def hc_split_sinkhorn(m, scale, base, hc, iters, eps):
    """ref: kernel.py hc_split_sinkhorn. m: fp32 [T, (2+hc)*hc] -> pre [T,hc], post [T,hc],
    comb [T,hc,hc] (comb[t, i, j]: input copy i -> output copy j)."""
    eps = F32(eps)
    pre = nx.sigmoid(m[:, :hc] * scale[0] + base[:hc]) + eps
    post = F32(2.0) * nx.sigmoid(m[:, hc : 2 * hc] * scale[1] + base[hc : 2 * hc])
    M = (m[:, 2 * hc :] * scale[2] + base[2 * hc :]).reshape(-1, hc, hc)
    E = nx.exp(M - M.max(-1, keepdims=True))
    C = E / nx.xsum(E, axis=-1)[..., None] + eps
    C = C / (nx.xsum(C, axis=-2)[:, None, :] + eps)
    for _ in range(iters - 1):
        C = C / (nx.xsum(C, axis=-1)[..., None] + eps)
        C = C / (nx.xsum(C, axis=-2)[:, None, :] + eps)
    return pre, post, C
