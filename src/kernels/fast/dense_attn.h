// The vision tower's dense attention on eight fp32 lanes (kernel_table.h dense_attn): the same
// steps as the reference (scores, max, exp, denominator, probabilities, p * v) with fp32 FMA
// sums instead of exact ones and the vector exp (~2 ulps). K is transposed once per call so that
// one vector holds eight keys' scores; four queries share each key and value load; a head width
// that is not a multiple of 8 finishes the p * v sums in scalar code.
#pragma once

#include <immintrin.h>

#include <cstddef>

#include "kernels/fast/vec256.h"
#include "kernels/fast/vmath.h"

namespace cedar::kernels::fast {
namespace {

constexpr int kDenseQ = 4;  // queries per pass over the keys

inline int pad8(int n) { return (n + 7) & ~7; }

size_t dense_attn_scratch(int n, int hd) {
  return size_t(kDenseQ) * (size_t(pad8(n)) + size_t(hd)) + size_t(pad8(n)) * size_t(hd);
}

// Scores this far below the row's maximum get probability 0 instead of e^x: below about -87
// e^x is subnormal, and subnormal operands slow the p * v products many times over on some
// CPUs (measured: a smooth image's tower 5x slower); what is dropped is below 1e-30 of the sum.
constexpr float kDenseMinExp = -70.0f;

// p [n] scores -> probabilities in place (softmax over all n)
inline void softmax_row(float* p, int n) {
  __m256 m8 = _mm256_set1_ps(-__builtin_inff());
  int j = 0;
  for (; j + 8 <= n; j += 8) m8 = _mm256_max_ps(m8, V8::load(p + j));
  float mx = V8::hmax(m8);
  for (; j < n; ++j) mx = p[j] > mx ? p[j] : mx;
  const __m256 mv = _mm256_set1_ps(mx), lo = _mm256_set1_ps(kDenseMinExp);
  __m256 s8 = _mm256_setzero_ps();
  for (j = 0; j + 8 <= n; j += 8) {
    const __m256 x = _mm256_sub_ps(V8::load(p + j), mv);
    const __m256 e = _mm256_and_ps(exp8(x), _mm256_cmp_ps(x, lo, _CMP_GE_OQ));
    V8::store(p + j, e);
    s8 = _mm256_add_ps(s8, e);
  }
  float den = V8::hsum(s8);
  for (; j < n; ++j) den += (p[j] = p[j] - mx >= kDenseMinExp ? exp1(p[j] - mx) : 0.0f);
  const __m256 inv = _mm256_set1_ps(1.0f / den);
  for (j = 0; j + 8 <= n; j += 8) V8::store(p + j, _mm256_mul_ps(V8::load(p + j), inv));
  for (; j < n; ++j) p[j] *= 1.0f / den;
}

// scores of M <= kDenseQ queries against every key, eight keys per vector: kt [hd, n8] is K
// transposed (zero-padded to n8 keys), s [M, n8]
template <int M>
inline void score_rows(const float* q, int ld, const float* kt, int n8, int hd, float scale,
                       float* s) {
  const __m256 sc = _mm256_set1_ps(scale);
  for (int j = 0; j < n8; j += 8) {
    __m256 acc[M];
    for (int r = 0; r < M; ++r) acc[r] = _mm256_setzero_ps();
    for (int d = 0; d < hd; ++d) {
      const __m256 k8 = V8::load(kt + size_t(d) * n8 + j);
      for (int r = 0; r < M; ++r)
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(q[size_t(r) * ld + d]), k8, acc[r]);
    }
    for (int r = 0; r < M; ++r) V8::store(s + size_t(r) * n8 + j, _mm256_mul_ps(acc[r], sc));
  }
}

// acc [M, hd] = p [M, n8] . V [n, hd] (rows ld apart): eight channels at a time with the M
// queries' sums in registers, so that no sum waits on a store; a tail of hd % 8 in scalar code.
template <int M>
inline void pv_rows(const float* p, int n8, int n, const float* v, int ld, int hd, float* acc) {
  int c = 0;
  for (; c + 8 <= hd; c += 8) {
    __m256 a[M];
    for (int r = 0; r < M; ++r) a[r] = _mm256_setzero_ps();
    for (int j = 0; j < n; ++j) {
      const __m256 v8 = V8::load(v + size_t(j) * ld + c);
      for (int r = 0; r < M; ++r)
        a[r] = _mm256_fmadd_ps(_mm256_set1_ps(p[size_t(r) * n8 + j]), v8, a[r]);
    }
    for (int r = 0; r < M; ++r) V8::store(acc + size_t(r) * hd + c, a[r]);
  }
  for (; c < hd; ++c)
    for (int r = 0; r < M; ++r) {
      float s = 0.0f;
      for (int j = 0; j < n; ++j) s += p[size_t(r) * n8 + j] * v[size_t(j) * ld + c];
      acc[size_t(r) * hd + c] = s;
    }
}

void dense_attn(const float* q, int nq, const float* k, const float* v, int n, int hd, int ld,
                float scale, float* out, int ldo, float* scratch) {
  const int n8 = pad8(n);
  float* p = scratch;                      // [kDenseQ, n8]
  float* acc = p + size_t(kDenseQ) * n8;   // [kDenseQ, hd]
  float* kt = acc + size_t(kDenseQ) * hd;  // [hd, n8]
  for (int d = 0; d < hd; ++d)
    for (int j = 0; j < n8; ++j) kt[size_t(d) * n8 + j] = j < n ? k[size_t(j) * ld + d] : 0.0f;
  for (int i0 = 0; i0 < nq; i0 += kDenseQ) {
    const int m = nq - i0 < kDenseQ ? nq - i0 : kDenseQ;
    // a full group with its sums in registers; the last rows one at a time
    if (m == kDenseQ)
      score_rows<kDenseQ>(q + size_t(i0) * ld, ld, kt, n8, hd, scale, p);
    else
      for (int r = 0; r < m; ++r)
        score_rows<1>(q + size_t(i0 + r) * ld, ld, kt, n8, hd, scale, p + size_t(r) * n8);
    for (int r = 0; r < m; ++r) softmax_row(p + size_t(r) * n8, n);
    if (m == kDenseQ)
      pv_rows<kDenseQ>(p, n8, n, v, ld, hd, acc);
    else
      for (int r = 0; r < m; ++r)
        pv_rows<1>(p + size_t(r) * n8, n8, n, v, ld, hd, acc + size_t(r) * hd);
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
