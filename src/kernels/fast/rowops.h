// The fast row kernels of the block: RMSNorm, RoPE, mHC hc_pre / hc_post and the SwiGLU
// activation, on eight fp32 lanes. The reference sums in double: hc_pre and hc_post keep that (each
// output sums hc fp32 products in double lanes in the reference's order, so they are bit-exact),
// RMSNorm sums its squares in four double lanes (a different order of nearly exact sums: the mean
// rounds to the same fp32 value but for ~1e-8 of rows). SwiGLU's silu uses the vector exp (~2
// ulps).
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/fast/vmath.h"

namespace cedar::kernels::fast {
namespace {

inline __m256d widen_lo(__m256 v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
inline __m256d widen_hi(__m256 v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }

// Eight double sums (lo: lanes 0..3, hi: 4..7) -> fp32 like fmath::round_sum: one rounding, and
// a zero result is +0.0 (adding +0.0f turns -0.0f into +0.0f and changes nothing else).
inline __m256 round_sums(__m256d lo, __m256d hi) {
  const __m256 f = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
  return _mm256_add_ps(f, _mm256_setzero_ps());
}

inline double hsum_pd(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// sum of double(x[i]^2) (fp32 squares, exact for bf16 x) in four double accumulators
inline double sum_squares(const float* x, int n) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                    _mm256_setzero_pd()};
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256 a2 = _mm256_mul_ps(a, a), b2 = _mm256_mul_ps(b, b);
    acc[0] = _mm256_add_pd(acc[0], widen_lo(a2));
    acc[1] = _mm256_add_pd(acc[1], widen_hi(a2));
    acc[2] = _mm256_add_pd(acc[2], widen_lo(b2));
    acc[3] = _mm256_add_pd(acc[3], widen_hi(b2));
  }
  double ss = hsum_pd(_mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3])));
  for (; i < n; ++i) ss += double(x[i] * x[i]);
  return ss;
}

// ref: model.py RMSNorm.forward (NUMERICS §N)
void rms_norm(const float* x, int n, const uint16_t* w, float eps, float* out) {
  const float var = float(sum_squares(x, n) / double(n));
  // 1/sqrt in double rounded once: the reference's correctly rounded rsqrt except within a
  // double ulp of an fp32 midpoint
  const float r = float(1.0 / __builtin_sqrt(double(var + eps)));
  const __m256 rv = _mm256_set1_ps(r);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + i), rv);
    _mm256_storeu_ps(out + i, bf16_round8(_mm256_mul_ps(load_bf16x8(w + i), y)));
  }
  for (; i < n; ++i) out[i] = bf16_round1(bf16_f32(w[i]) * (x[i] * r));
}

// ref: model.py Block.hc_pre: x[d] = bf16(xsum_c f32(mix[c] * h[c][d])), the sum in double in
// copy order like the reference (bit-exact).
void hc_pre(const float* h, const float* mix, int hc, int D, float* x) {
  int d = 0;
  for (; d + 8 <= D; d += 8) {
    __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
    for (int c = 0; c < hc; ++c) {
      const __m256 p =
          _mm256_mul_ps(_mm256_set1_ps(mix[c]), _mm256_loadu_ps(h + size_t(c) * D + d));
      lo = _mm256_add_pd(lo, widen_lo(p));
      hi = _mm256_add_pd(hi, widen_hi(p));
    }
    _mm256_storeu_ps(x + d, bf16_round8(round_sums(lo, hi)));
  }
  for (; d < D; ++d) {
    double s = 0;
    for (int c = 0; c < hc; ++c) s += double(mix[c] * h[size_t(c) * D + d]);
    x[d] = bf16_round1(float(s) + 0.0f);
  }
}

// ref: model.py Block.hc_post: out[j][d] = bf16(f32(post[j] * y[d]) + xsum_i f32(comb[i][j] *
// h[i][d])), the sum in double in copy order (bit-exact).
void hc_post(const float* y, const float* h, const float* post, const float* comb, int hc, int D,
             float* out) {
  for (int j = 0; j < hc; ++j) {
    const __m256 pj = _mm256_set1_ps(post[j]);
    float* o = out + size_t(j) * D;
    int d = 0;
    for (; d + 8 <= D; d += 8) {
      __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
      for (int i = 0; i < hc; ++i) {
        const __m256 p =
            _mm256_mul_ps(_mm256_set1_ps(comb[i * hc + j]), _mm256_loadu_ps(h + size_t(i) * D + d));
        lo = _mm256_add_pd(lo, widen_lo(p));
        hi = _mm256_add_pd(hi, widen_hi(p));
      }
      const __m256 py = _mm256_mul_ps(pj, _mm256_loadu_ps(y + d));
      _mm256_storeu_ps(o + d, bf16_round8(_mm256_add_ps(py, round_sums(lo, hi))));
    }
    for (; d < D; ++d) {
      double s = 0;
      for (int i = 0; i < hc; ++i) s += double(comb[i * hc + j] * h[size_t(i) * D + d]);
      o[d] = bf16_round1(post[j] * y[d] + (float(s) + 0.0f));
    }
  }
}

// ref: model.py apply_rotary_emb (kernels/ref rope): each pair (x0, x1) becomes
// (x0 c - x1 s, x0 s + x1 c), rounded to bf16. Four pairs per vector with the reference's fp32
// products and sums and no fused multiply-add (x1 * -s is -(x1 * s) exactly, and a - b = a + -b),
// so the result is bit-exact.
void rope(float* x, int rd, const float* cos, const float* sin, bool inverse) {
  const int pairs = rd / 2;
  const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  // the sign of s in each lane: -s on the even (x0) outputs, +s on the odd; swapped for inverse
  const __m256 sgn = inverse ? _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1)
                             : _mm256_setr_ps(-1, 1, -1, 1, -1, 1, -1, 1);
  int k = 0;
  for (; k + 4 <= pairs; k += 4) {
    const __m256 v = _mm256_loadu_ps(x + 2 * k);
    const __m256 sw = _mm256_permute_ps(v, 0xB1);  // (x1, x0) in each pair
    const __m256 c = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(cos + k)), dup);
    const __m256 s = _mm256_mul_ps(
        _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(sin + k)), dup), sgn);
    _mm256_storeu_ps(x + 2 * k,
                     bf16_round8(_mm256_add_ps(_mm256_mul_ps(v, c), _mm256_mul_ps(sw, s))));
  }
  for (; k < pairs; ++k) {
    const float c = cos[k], s = inverse ? -sin[k] : sin[k];
    const float x0 = x[2 * k], x1 = x[2 * k + 1];
    x[2 * k] = bf16_round1(x0 * c - x1 * s);
    x[2 * k + 1] = bf16_round1(x0 * s + x1 * c);
  }
}

// silu(g) * u (clamped), times the routing weight, rounded to bf16, on eight lanes
inline __m256 swiglu8(__m256 g, __m256 u, float limit, bool weighted, float weight) {
  if (limit > 0) {
    const __m256 L = _mm256_set1_ps(limit);
    u = _mm256_min_ps(_mm256_max_ps(u, _mm256_set1_ps(-limit)), L);
    g = _mm256_min_ps(g, L);
  }
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  __m256 a = _mm256_mul_ps(silu, u);
  if (weighted) a = _mm256_mul_ps(_mm256_set1_ps(weight), a);
  return bf16_round8(a);
}

// ref: model.py Expert.forward between the GEMMs (kernel_table.h swiglu)
void swiglu(const float* g, const float* u, int n, float limit, bool weighted, float weight,
            float* out) {
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(
        out + j, swiglu8(_mm256_loadu_ps(g + j), _mm256_loadu_ps(u + j), limit, weighted, weight));
  for (; j < n; ++j)
    out[j] = _mm256_cvtss_f32(
        swiglu8(_mm256_set1_ps(g[j]), _mm256_set1_ps(u[j]), limit, weighted, weight));
}

// kernel_table.h add_argmax: eight lanes each keep their first strict maximum (from -inf, so NaN
// and -inf never enter); the result is the lowest index among the lanes holding the largest, then
// the tail continues the scan. That is the sequential scan's answer whenever out[0] is not NaN
// (NaN there keeps the scan at 0, checked first).
int64_t add_argmax(const float* a, const float* b, int64_t n, float* out) {
  if (n <= 0) return 0;
  __m256 best = _mm256_set1_ps(-INFINITY);
  __m256i best_i = _mm256_set1_epi32(-1);
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    _mm256_storeu_ps(out + i, v);
    const __m256 gt = _mm256_cmp_ps(v, best, _CMP_GT_OQ);
    best = _mm256_blendv_ps(best, v, gt);
    best_i = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(best_i), _mm256_castsi256_ps(idx), gt));
    idx = _mm256_add_epi32(idx, _mm256_set1_epi32(8));
  }
  alignas(32) float bv[8];
  alignas(32) int32_t bi[8];
  _mm256_store_ps(bv, best);
  _mm256_store_si256(reinterpret_cast<__m256i*>(bi), best_i);
  int64_t r = -1;
  float rv = -INFINITY;
  for (int l = 0; l < 8; ++l)
    if (bi[l] >= 0 && (r < 0 || bv[l] > rv || (bv[l] == rv && bi[l] < r))) {
      r = bi[l];
      rv = bv[l];
    }
  for (; i < n; ++i) {
    out[i] = a[i] + b[i];
    if (out[i] > rv) {
      r = i;
      rv = out[i];
    }
  }
  return r < 0 || std::isnan(out[0]) ? 0 : r;
}

}  // namespace
}  // namespace cedar::kernels::fast
