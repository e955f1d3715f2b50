// Reference kernels other than quantizers and GEMMs: RMSNorm, RoPE, sparse_attn over packed keys,
// the vision tower's dense attention, the indexer scores, hc_split_sinkhorn, hc_pre/hc_post, the
// SwiGLU activation and the CUDA top-k rule (NUMERICS §N, §P, §A, §C, §B, §M; docs/VISION.md).
#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/ref/lanes.h"
#include "kernels/ref/ref.h"
#include "numerics/bf16.h"
#include "numerics/fmath.h"
#include "numerics/fp4.h"

namespace cedar::kernels::ref {

// ref: model.py RMSNorm.forward
void rms_norm(const float* x, int n, const uint16_t* w, float eps, float* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i] * x[i]);  // squares rounded to fp32 (exact: bf16)
  const float var = float(ss / double(n));                // mean: double sum / N, one rounding
  const float r = fmath::rsqrt(var + eps);
  for (int i = 0; i < n; ++i) {
    const float y = x[i] * r;
    out[i] = round_bf16(bf16_to_f32(w[i]) * y);
  }
}

// ref: model.py apply_rotary_emb (complex64 product: real = ac - bd, imag = ad + bc, each
// product rounded to fp32), written back to bf16.
void rope(float* x, int rd, const float* cos, const float* sin, bool inverse) {
  for (int k = 0; k < rd / 2; ++k) {
    const float c = cos[k], s = inverse ? -sin[k] : sin[k];
    const float x0 = x[2 * k], x1 = x[2 * k + 1];
    const float y0 = x0 * c - x1 * s;
    const float y1 = x0 * s + x1 * c;
    x[2 * k] = round_bf16(y0);
    x[2 * k + 1] = round_bf16(y1);
  }
}

namespace {

// ref: kernel.py sparse_attn, one (query, head) over decoded key rows: online softmax over
// blocks of 64 list entries, probabilities rounded to bf16 relative to the running max, the sink
// added to the denominator only at the end (canonical-arithmetic rule 2).
CEDAR_MULTIVERSION
void sparse_attn_head(const float* q, int hd, const float* keys, int n_keys, float sink,
                      float scale, float* acc, double* blk, float* out) {
  constexpr int kBlock = 64;
  std::fill_n(acc, hd, 0.0f);
  float s[kBlock], p[kBlock];
  float den = 0.0f, mx = -1e30f;
  for (int b0 = 0; b0 < n_keys; b0 += kBlock) {
    const int nb = std::min(kBlock, n_keys - b0);
    float bmax = -INFINITY;
    for (int j = 0; j < nb; ++j) {
      s[j] = fmath::round_sum(simd::dot_lanes(q, keys + size_t(b0 + j) * hd, hd)) * scale;
      bmax = std::max(bmax, s[j]);
    }
    const float mnew = std::max(mx, bmax);
    const float alpha = fmath::exp(mx - mnew);
    double psum = 0;
    for (int j = 0; j < nb; ++j) {
      p[j] = fmath::exp(s[j] - mnew);
      psum += double(p[j]);
    }
    den = den * alpha + fmath::round_sum(psum);
    std::fill_n(blk, hd, 0.0);
    for (int j = 0; j < nb; ++j) {
      const float pb = round_bf16(p[j]);
      const float* k = keys + size_t(b0 + j) * hd;
      for (int d = 0; d < hd; ++d) blk[d] += double(pb * k[d]);  // exact products
    }
    for (int d = 0; d < hd; ++d) acc[d] = acc[d] * alpha + fmath::round_sum(blk[d]);
    mx = mnew;
  }
  den = den + fmath::exp(sink - mx);
  for (int d = 0; d < hd; ++d) out[d] = round_bf16(acc[d] / den);
}

}  // namespace

// The key list decoded once to exact bf16 values (window FP8 rows, then compressed FP4 rows),
// then one exact online softmax per head.
size_t sparse_attn_scratch(int, int hd) { return size_t(hd) * 2; }

void sparse_attn(const float* q, int H, int hd, const AttnKeys& keys, const float* sink,
                 float scale, float* out, float* scratch) {
  const int n = keys.n_win + keys.n_comp;
  std::vector<float> kv(size_t(n) * size_t(hd));
  for (int j = 0; j < keys.n_win; ++j)
    dequant_fp8(keys.win[j].codes, keys.win[j].scales, hd, kv.data() + size_t(j) * hd);
  for (int j = 0; j < keys.n_comp; ++j)
    dequant_fp4_e4m3(keys.comp[j].codes, keys.comp[j].scales, hd,
                     kv.data() + size_t(keys.n_win + j) * hd);
  std::vector<double> blk(static_cast<size_t>(hd));
  for (int h = 0; h < H; ++h)
    sparse_attn_head(q + size_t(h) * hd, hd, kv.data(), n, sink[h], scale, scratch, blk.data(),
                     out + size_t(h) * hd);
}

// The vision tower's softmax attention (docs/VISION.md "Arithmetic"): scores fp32(exact q.k) *
// scale, exp(s - max) correctly rounded, an exact denominator, the probabilities materialised in
// fp32 (SDPA's softmax output) and the exact products p * v summed per output channel.
size_t dense_attn_scratch(int n, int) { return size_t(n); }

void dense_attn(const float* q, int nq, const float* k, const float* v, int n, int hd, int ld,
                float scale, float* out, int ldo, float* scratch) {
  float* p = scratch;
  std::vector<double> acc(static_cast<size_t>(hd));
  for (int i = 0; i < nq; ++i) {
    const float* qi = q + size_t(i) * size_t(ld);
    float mx = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < n; ++j) {
      p[j] = fmath::round_sum(simd::dot_lanes(qi, k + size_t(j) * size_t(ld), hd)) * scale;
      mx = std::max(mx, p[j]);
    }
    double den = 0;
    for (int j = 0; j < n; ++j) {
      p[j] = fmath::exp(p[j] - mx);
      den += double(p[j]);
    }
    const float d = fmath::round_sum(den);
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int j = 0; j < n; ++j) {
      const double pj = double(p[j] / d);
      const float* vj = v + size_t(j) * size_t(ld);
      for (int c = 0; c < hd; ++c) acc[c] += pj * double(vj[c]);  // exact fp32 x bf16 products
    }
    for (int c = 0; c < hd; ++c)
      out[size_t(i) * size_t(ldo) + c] = round_bf16(fmath::round_sum(acc[c]));
  }
}

namespace {

// An FP4 (UE8M0 / 32) key as small integers: c2 = 2 * E2M1 value, an integer in [-12, 12].
void unpack_fp4_twice(const uint8_t* packed, int n, int8_t* c2) {
  static const int8_t kTwice[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  for (int i = 0; i < n; i += 2) {
    c2[i] = kTwice[fp4_lo(packed[i / 2])];
    c2[i + 1] = kTwice[fp4_hi(packed[i / 2])];
  }
}

inline int32_t idot32(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < 32; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

}  // namespace

// NUMERICS §C, per key row: per head sc = bf16(q.k) (exact integer block sums times powers of
// two, rounded once to fp32 then bf16), pr = bf16(relu(sc) * w), score = bf16(xsum_h pr).
CEDAR_MULTIVERSION
void index_scores(const int8_t* qc, const uint8_t* qe, const float* w, int IH, int ihd,
                  const uint8_t* keys, const uint8_t* key_scales, const int32_t* rows, int64_t n,
                  float* score) {
  const int nb32 = ihd / 32;
  std::vector<int8_t> kt(static_cast<size_t>(ihd));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = rows ? rows[i] : i;
    unpack_fp4_twice(keys + size_t(t) * size_t(ihd / 2), ihd, kt.data());
    const uint8_t* ke = key_scales + size_t(t) * size_t(nb32);
    double acc = 0;
    for (int h = 0; h < IH; ++h) {
      const int8_t* qh = qc + size_t(h) * ihd;
      const uint8_t* qeh = qe + size_t(h) * nb32;
      double d = 0;
      for (int b = 0; b < nb32; ++b)
        d += double(idot32(qh + b * 32, kt.data() + b * 32)) *
             fmath::pow2d(int(qeh[b]) + int(ke[b]) - 256);
      const float sc = round_bf16(fmath::round_sum(d));  // bf16 einsum output
      const float rl = sc > 0.0f ? sc : 0.0f;
      acc += double(round_bf16(rl * w[h]));  // product rounded to bf16
    }
    score[i] = round_bf16(fmath::round_sum(acc));
  }
}

// ref: model.py Block.hc_pre
void hc_pre(const float* h, const float* mix, int hc, int D, float* x) {
  for (int d = 0; d < D; ++d) {
    double s = 0;
    for (int c = 0; c < hc; ++c) s += double(mix[c] * h[c * D + d]);
    x[d] = round_bf16(fmath::round_sum(s));
  }
}

// ref: model.py Block.hc_post
void hc_post(const float* y, const float* h, const float* post, const float* comb, int hc, int D,
             float* out) {
  for (int j = 0; j < hc; ++j)
    for (int d = 0; d < D; ++d) {
      double s = 0;
      for (int i = 0; i < hc; ++i) s += double(comb[i * hc + j] * h[i * D + d]);
      out[j * D + d] = round_bf16(post[j] * y[d] + fmath::round_sum(s));
    }
}

// ref: model.py Expert.forward: clamps from training (up on both sides, gate from above only),
// silu(gate) * up, the routing weight, cast back to the activation dtype
void swiglu(const float* g, const float* u, int n, float limit, bool weighted, float weight,
            float* out) {
  for (int j = 0; j < n; ++j) {
    float gv = g[j], uv = u[j];
    if (limit > 0) {
      uv = std::clamp(uv, -limit, limit);
      gv = std::min(gv, limit);
    }
    float a = fmath::silu(gv) * uv;
    if (weighted) a = weight * a;
    out[j] = round_bf16(a);
  }
}

// ref: kernel.py hc_split_sinkhorn (NUMERICS §B)
void hc_split_sinkhorn(const float* m, const float* scale, const float* base, int hc, int iters,
                       float eps, float* pre, float* post, float* comb) {
  for (int c = 0; c < hc; ++c) {
    pre[c] = fmath::sigmoid(m[c] * scale[0] + base[c]) + eps;
    post[c] = 2.0f * fmath::sigmoid(m[hc + c] * scale[1] + base[hc + c]);
  }
  float* C = comb;
  for (int i = 0; i < hc; ++i) {
    float row[16];
    float mx = -INFINITY;
    for (int j = 0; j < hc; ++j) {
      const int t = 2 * hc + i * hc + j;
      row[j] = m[t] * scale[2] + base[t];
      mx = std::max(mx, row[j]);
    }
    double es = 0;
    for (int j = 0; j < hc; ++j) {
      row[j] = fmath::exp(row[j] - mx);
      es += double(row[j]);
    }
    const float sum = fmath::round_sum(es);
    for (int j = 0; j < hc; ++j) C[i * hc + j] = row[j] / sum + eps;
  }
  auto col_norm = [&] {
    for (int j = 0; j < hc; ++j) {
      double cs = 0;
      for (int i = 0; i < hc; ++i) cs += double(C[i * hc + j]);
      const float d = fmath::round_sum(cs) + eps;
      for (int i = 0; i < hc; ++i) C[i * hc + j] = C[i * hc + j] / d;
    }
  };
  auto row_norm = [&] {
    for (int i = 0; i < hc; ++i) {
      double rs = 0;
      for (int j = 0; j < hc; ++j) rs += double(C[i * hc + j]);
      const float d = fmath::round_sum(rs) + eps;
      for (int j = 0; j < hc; ++j) C[i * hc + j] = C[i * hc + j] / d;
    }
  };
  col_norm();
  for (int it = 0; it < iters - 1; ++it) {
    row_norm();
    col_norm();
  }
}

// ref: model.py DSparkBlock.forward_head: logits + the Markov bias, then argmax (first maximum)
int64_t add_argmax(const float* a, const float* b, int64_t n, float* out) {
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = a[i] + b[i];
    if (out[i] > out[best]) best = i;
  }
  return best;
}

// torch.topk on CUDA (canonical-arithmetic rule 5)
void topk(const float* v, int n, int k, int* out) {
  k = std::clamp(k, 0, n);
  if (k == 0) return;
  std::vector<int> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  auto better = [&](int a, int b) {
    const uint32_t ka = fmath::radix_key(v[a]), kb = fmath::radix_key(v[b]);
    return ka != kb ? ka > kb : a < b;
  };
  if (k < n) std::nth_element(idx.begin(), idx.begin() + (k - 1), idx.end(), better);
  std::sort(idx.begin(), idx.begin() + k);
  std::copy(idx.begin(), idx.begin() + k, out);
}

}  // namespace cedar::kernels::ref
