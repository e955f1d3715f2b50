"""The vectorized reference kernels against scalar loops written straight from docs/NUMERICS.md
(block GEMM §G, sparse_attn §A, hc_split_sinkhorn §B, top-k rule, RoPE §P). The loops catch
axis, order and rounding-point mistakes of the numpy vectorization."""

import math
import os
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "reference"))

import kernel  # noqa: E402
import numerics as nx  # noqa: E402
import rope  # noqa: E402
from model import select_candidate_blocks, topk_rows  # noqa: E402

F32 = np.float32


def f(x):
    return F32(x)


def same_bits(a, b):
    return np.array_equal(np.asarray(a, F32).view(np.uint32), np.asarray(b, F32).view(np.uint32))


class TestBlockGemm(unittest.TestCase):
    def test_against_scalar_loop(self):
        rng = np.random.default_rng(10)
        T, N, K = 3, 5, 96
        x = nx.bf16(rng.standard_normal((T, K)).astype(F32) * 4)
        w = nx.e4m3_round(rng.standard_normal((N, K)).astype(F32) * 20)
        sw = np.exp2(rng.integers(-12, -4, (N, K // 32))).astype(F32)
        got = kernel.block_scaled_gemm(*nx.act_quant(x, 32), kernel._blocked(w), sw)
        q, sx = nx.act_quant(x, 32)
        for t in range(T):
            for n in range(N):
                acc = f(0)
                for k in range(K // 32):
                    p = f(sum(float(q[t, i]) * float(w[n, i]) for i in range(32 * k, 32 * k + 32)))
                    acc = f(acc + f(f(p * sx[t, k]) * sw[n, k]))
                self.assertTrue(same_bits(got[t, n], acc), (t, n))


def sparse_attn_loop(q, kv, lists, sink, scale):
    """NUMERICS.md §A for one query row list, every head, with python scalars."""
    T, H, d = q.shape
    out = np.zeros((T, H, d), F32)
    for t in range(T):
        lst = [int(i) for i in lists[t] if i >= 0]
        for h in range(H):
            acc = np.zeros(d, F32)
            den, mx = f(0), f(-1e30)
            for b0 in range(0, len(lst), 64):
                blk = lst[b0 : b0 + 64]
                s = [f(f(math.fsum(float(a) * float(c) for a, c in zip(q[t, h], kv[j]))) * scale)
                     for j in blk]
                mnew = f(max(mx, max(s)))
                alpha = f(math.exp(float(f(mx - mnew))))
                p = [f(math.exp(float(f(sj - mnew)))) for sj in s]
                den = f(f(den * alpha) + f(math.fsum(float(v) for v in p)))
                pb = [float(nx.bf16(v)) for v in p]
                for dd in range(d):
                    pv = f(math.fsum(pb[i] * float(kv[j, dd]) for i, j in enumerate(blk)))
                    acc[dd] = f(f(acc[dd] * alpha) + pv)
                mx = mnew
            den = f(den + f(math.exp(float(f(sink[h] - mx)))))
            out[t, h] = nx.bf16(acc / den)
    return out


class TestSparseAttn(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(11)
        self.T, self.H, self.d, R = 3, 2, 8, 150
        self.q = nx.bf16(rng.standard_normal((self.T, self.H, self.d)).astype(F32) * 0.4)
        self.kv = nx.bf16(rng.standard_normal((R, self.d)).astype(F32) * 3)
        self.sink = rng.standard_normal(self.H).astype(F32)
        lists = np.full((self.T, 140), -1, np.int64)
        lists[0, :1] = [5]
        lists[1, :70] = rng.permutation(R)[:70]  # crosses one 64-block boundary
        lists[2, :140] = rng.permutation(R)[:140]
        self.lists = lists
        self.scale = F32(self.d**-0.5)

    def test_against_scalar_loop(self):
        got = kernel.sparse_attn(self.q, self.kv, self.lists, self.sink, self.scale)
        want = sparse_attn_loop(self.q, self.kv, self.lists, self.sink, self.scale)
        self.assertTrue(same_bits(got, want))

    def test_trailing_padding_is_exact(self):
        a = kernel.sparse_attn(self.q, self.kv, self.lists, self.sink, self.scale)
        padded = np.concatenate([self.lists, np.full((self.T, 200), -1)], axis=1)
        b = kernel.sparse_attn(self.q, self.kv, padded, self.sink, self.scale, chunk=1)
        self.assertTrue(same_bits(a, b))

    def test_block_order_matters(self):
        # probabilities are rounded to bf16 relative to the running max: listing the best key
        # last instead of first changes the result (the order is part of the contract)
        lst = self.lists[2, :140]
        score = (self.q[2, 0].astype(np.float64) @ self.kv[lst].astype(np.float64).T)
        asc = self.lists.copy()
        asc[2, :140] = lst[np.argsort(score)]
        desc = self.lists.copy()
        desc[2, :140] = lst[np.argsort(-score)]
        a = kernel.sparse_attn(self.q, self.kv, asc, self.sink, self.scale)
        b = kernel.sparse_attn(self.q, self.kv, desc, self.sink, self.scale)
        self.assertTrue(same_bits(a[:2], b[:2]))
        self.assertFalse(same_bits(a[2, 0], b[2, 0]))
        np.testing.assert_allclose(a[2, 0], b[2, 0], rtol=0.05, atol=0.05)


def sinkhorn_loop(m, scale, base, hc, iters, eps):
    eps = f(eps)
    sig = lambda v: f(1.0 / (1.0 + math.exp(-float(v))))  # noqa: E731
    pre = [f(sig(f(f(m[c] * scale[0]) + base[c])) + eps) for c in range(hc)]
    post = [f(2 * sig(f(f(m[hc + c] * scale[1]) + base[hc + c]))) for c in range(hc)]
    M = [[f(f(m[2 * hc + hc * i + j] * scale[2]) + base[2 * hc + hc * i + j]) for j in range(hc)]
         for i in range(hc)]
    C = [[None] * hc for _ in range(hc)]
    for i in range(hc):
        mx = max(M[i])
        E = [f(math.exp(float(f(M[i][j] - mx)))) for j in range(hc)]
        S = f(math.fsum(float(e) for e in E))
        for j in range(hc):
            C[i][j] = f(f(E[j] / S) + eps)

    def col():
        for j in range(hc):
            S = f(f(math.fsum(float(C[i][j]) for i in range(hc))) + eps)
            for i in range(hc):
                C[i][j] = f(C[i][j] / S)

    def row():
        for i in range(hc):
            S = f(f(math.fsum(float(C[i][j]) for j in range(hc))) + eps)
            for j in range(hc):
                C[i][j] = f(C[i][j] / S)

    col()
    for _ in range(iters - 1):
        row()
        col()
    return np.array(pre, F32), np.array(post, F32), np.array(C, F32)


class TestSinkhorn(unittest.TestCase):
    def test_against_scalar_loop(self):
        rng = np.random.default_rng(12)
        hc = 4
        m = (rng.standard_normal((3, (2 + hc) * hc)) * 2).astype(F32)
        scale = rng.uniform(0.5, 2, 3).astype(F32)
        base = rng.standard_normal((2 + hc) * hc).astype(F32)
        pre, post, comb = kernel.hc_split_sinkhorn(m, scale, base, hc, 20, 1e-6)
        for t in range(3):
            p, q, C = sinkhorn_loop(m[t], scale, base, hc, 20, 1e-6)
            self.assertTrue(same_bits(pre[t], p))
            self.assertTrue(same_bits(post[t], q))
            self.assertTrue(same_bits(comb[t], C))
        # ends on a column normalisation: columns sum to ~1
        np.testing.assert_allclose(comb.sum(axis=1), 1.0, atol=1e-5)


class TestTopK(unittest.TestCase):
    def test_order_and_ties(self):
        v = np.array([1.0, 3.0, 3.0, -np.inf, np.inf, 0.0, -0.0, 3.0], F32)
        np.testing.assert_array_equal(nx.topk_rule(v, 4), [4, 1, 2, 7])
        np.testing.assert_array_equal(nx.topk_rule(v, 8), [4, 1, 2, 7, 0, 5, 6, 3])
        # +0.0 ranks above -0.0 even when -0.0 comes first
        np.testing.assert_array_equal(nx.topk_rule(np.array([-0.0, 0.0], F32), 1), [1])

    def test_valid_mask(self):
        v = np.array([[5.0, 1.0, 9.0, -np.inf]], F32)
        valid = np.array([[True, True, False, True]])
        np.testing.assert_array_equal(nx.topk_rule(v, 3, valid), [[0, 1, 3]])

    def test_topk_rows_per_query(self):
        sc = np.array([[2.0, 7.0, 1.0, 9.0], [-np.inf, -np.inf, 4.0, 9.0], [0, 0, 0, 0]], F32)
        n_vis = np.array([2, 3, 0])
        got = topk_rows(sc, n_vis, 2)
        # query 1: row 2 is finite; one -inf visible row still fills k = 2 (the lower index)
        np.testing.assert_array_equal(got, [[0, 1], [0, 2], [-1, -1]])

    def test_candidate_blocks(self):
        B = 2
        sc = np.array([[5.0, 1.0, 7.0, 0.0, 2.0, 3.0, -np.inf, -np.inf]], F32)
        n_vis = np.array([6])
        pool = select_candidate_blocks(sc, n_vis, 2, B)
        # blocks: [5,1]->5, [7,0]->7, [2,3]->3 but it holds the newest row -> +inf
        np.testing.assert_array_equal(pool[0], [0, 0, 1, 1, 1, 1, 0, 0])
        pool = select_candidate_blocks(sc, np.array([1]), 3, B)
        np.testing.assert_array_equal(pool[0], [1, 1, 1, 1, 1, 1, 0, 0])


class TestRope(unittest.TestCase):
    def test_yarn_band(self):
        rd = 64
        base = rope.precompute_freqs(rd, 0, 160000.0, 16, 32, 1)
        yarn = rope.precompute_freqs(rd, 65536, 160000.0, 16, 32, 1)
        # cd(32) = 15.45 -> low 15, cd(1) = 24.71 -> high 25 (spec §3.5)
        np.testing.assert_array_equal(yarn[:16], base[:16])
        np.testing.assert_array_equal(yarn[25:], base[25:] / F32(16))
        self.assertTrue(np.all(yarn[16:25] < base[16:25]))
        self.assertTrue(np.all(yarn[16:25] > base[16:25] / 16))
        self.assertEqual(base[0], 1.0)
        k = 5
        self.assertEqual(base[k], F32(1.0) / F32(160000.0 ** float(F32(2 * k) / F32(rd))))

    def test_rotation(self):
        rng = np.random.default_rng(13)
        x = nx.bf16(rng.standard_normal((3, 2, 8)).astype(F32))
        freqs = rope.precompute_freqs(8, 0, 10000.0, 1, 32, 1)
        c, s = rope.cos_sin(np.array([0, 1, 1000]), freqs)
        y = rope.apply_rotary_emb(x, c, s)
        self.assertTrue(same_bits(y[0], x[0]))  # position 0 is the identity
        # pair (x0, x1) at position 1, pair index 0 (freq 1): complex rotation, fp32 steps
        a = F32(1.0)
        cc, ss = nx.cos(a), nx.sin(a)
        x0, x1 = x[1, 1, 0], x[1, 1, 1]
        self.assertEqual(y[1, 1, 0], nx.bf16(f(f(x0 * cc) - f(x1 * ss))))
        self.assertEqual(y[1, 1, 1], nx.bf16(f(f(x0 * ss) + f(x1 * cc))))
        back = rope.apply_rotary_emb(y, c, s, inverse=True)
        np.testing.assert_allclose(back, x, rtol=0.02, atol=0.02)


if __name__ == "__main__":
    unittest.main()
