// The vision tower's dense attention on eight fp32 lanes (kernel_table.h dense_attn): the same
// steps as the reference (scores, max, exp, denominator, probabilities, p * v) with fp32 FMA
// sums instead of exact ones and the vector exp (~2 ulps). Four queries share each key and value
// row load; a head width that is not a multiple of 8 finishes in scalar code.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "kernels/fast/vec256.h"
#include "kernels/fast/vmath.h"

namespace cedar::kernels::fast {
namespace {

constexpr int kDenseQ = 4;  // queries per pass over the keys

size_t dense_attn_scratch(int n, int hd) { return size_t(kDenseQ) * (size_t(n) + size_t(hd)); }

inline float dot_f32(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(V8::load(a + i), V8::load(b + i), acc);
  float s = V8::hsum(acc);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// p [n] scores -> probabilities in place (softmax over all n)
inline void softmax_row(float* p, int n) {
  __m256 m8 = _mm256_set1_ps(-__builtin_inff());
  int j = 0;
  for (; j + 8 <= n; j += 8) m8 = _mm256_max_ps(m8, V8::load(p + j));
  float mx = V8::hmax(m8);
  for (; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
  const __m256 mv = _mm256_set1_ps(mx);
  __m256 s8 = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(V8::load(p + j), mv));
    V8::store(p + j, e);
    s8 = _mm256_add_ps(s8, e);
  }
  float den = V8::hsum(s8);
  for (; j < n; ++j) den += (p[j] = exp1(p[j] - mx));
  const __m256 inv = _mm256_set1_ps(1.0f / den);
  for (j = 0; j + 8 <= n; j += 8) V8::store(p + j, _mm256_mul_ps(V8::load(p + j), inv));
  for (; j < n; ++j) p[j] *= 1.0f / den;
}

void dense_attn(const float* q, int nq, const float* k, const float* v, int n, int hd, int ld,
                float scale, float* out, int ldo, float* scratch) {
  for (int i0 = 0; i0 < nq; i0 += kDenseQ) {
    const int m = nq - i0 < kDenseQ ? nq - i0 : kDenseQ;
    float* p = scratch;                          // [m, n]
    float* acc = scratch + size_t(kDenseQ) * n;  // [m, hd]
    for (int j = 0; j < n; ++j) {
      const float* kj = k + size_t(j) * size_t(ld);
      for (int r = 0; r < m; ++r)
        p[size_t(r) * n + j] = dot_f32(q + size_t(i0 + r) * size_t(ld), kj, hd) * scale;
    }
    for (int r = 0; r < m; ++r) softmax_row(p + size_t(r) * n, n);
    for (int x = 0; x < m * hd; ++x) acc[x] = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float* vj = v + size_t(j) * size_t(ld);
      for (int r = 0; r < m; ++r) {
        const float pj = p[size_t(r) * n + j];
        float* a = acc + size_t(r) * hd;
        const __m256 pv = _mm256_set1_ps(pj);
        int c = 0;
        for (; c + 8 <= hd; c += 8)
          V8::store(a + c, _mm256_fmadd_ps(pv, V8::load(vj + c), V8::load(a + c)));
        for (; c < hd; ++c) a[c] += pj * vj[c];
      }
    }
    for (int r = 0; r < m; ++r) {
      float* o = out + size_t(i0 + r) * size_t(ldo);
      const float* a = acc + size_t(r) * hd;
      int c = 0;
      for (; c + 8 <= hd; c += 8) V8::store(o + c, bf16_round8(V8::load(a + c)));
      for (; c < hd; ++c) o[c] = bf16_round1(a[c]);
    }
  }
}

}  // namespace
}  // namespace cedar::kernels::fast
