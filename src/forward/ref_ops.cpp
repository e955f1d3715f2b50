// Reference kernels other than quantizers and GEMMs: RMSNorm, RoPE, sparse_attn,
// hc_split_sinkhorn and the CUDA top-k rule (NUMERICS §N, §P, §A, §B, §C).
#include <algorithm>
#include <numeric>
#include <vector>

#include "forward/fmath.h"
#include "forward/kernels_ref.h"
#include "forward/simd.h"
#include "numerics/bf16.h"

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

// ref: kernel.py sparse_attn, one (query, head): online softmax over blocks of 64 list entries,
// probabilities rounded to bf16 relative to the running max, the sink added to the denominator
// only at the end (canonical-arithmetic rule 2).
CEDAR_MULTIVERSION
void sparse_attn(const float* q, int hd, const float* const* keys, int n_keys, float sink,
                 float scale, float* out) {
  constexpr int kBlock = 64;
  std::vector<float> acc(size_t(hd), 0.0f);
  std::vector<double> blk(static_cast<size_t>(hd));
  float s[kBlock], p[kBlock];
  float den = 0.0f, mx = -1e30f;
  for (int b0 = 0; b0 < n_keys; b0 += kBlock) {
    const int nb = std::min(kBlock, n_keys - b0);
    float bmax = -INFINITY;
    for (int j = 0; j < nb; ++j) {
      s[j] = fmath::round_sum(simd::dot_lanes(q, keys[b0 + j], hd)) * scale;
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
    std::fill(blk.begin(), blk.end(), 0.0);
    for (int j = 0; j < nb; ++j) {
      const float pb = round_bf16(p[j]);
      const float* k = keys[b0 + j];
      for (int d = 0; d < hd; ++d) blk[size_t(d)] += double(pb * k[d]);  // exact products
    }
    for (int d = 0; d < hd; ++d)
      acc[size_t(d)] = acc[size_t(d)] * alpha + fmath::round_sum(blk[size_t(d)]);
    mx = mnew;
  }
  den = den + fmath::exp(sink - mx);
  for (int d = 0; d < hd; ++d) out[d] = round_bf16(acc[size_t(d)] / den);
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
