// Eight-lane fp32 helpers of the fast non-GEMM kernels (AVX2 + FMA): exp, bf16 rounding, the
// fixed-tree reduction of eight accumulators, bf16 loads. Same rules as vec256.h: everything in
// an anonymous namespace, no header with external inline functions.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/quant.h"

namespace cedar::kernels::fast {
namespace {

// e^x on eight lanes, within ~2 fp32 ulps of the correctly rounded value (the reference's
// fmath::exp) for every x: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite, two constants), e^r by
// the Cephes expf polynomial, 2^n applied as two powers of two so that results in the subnormal
// range underflow gradually and overflow gives +inf. -inf and very negative x give +0.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-110.0f)), _mm256_set1_ps(90.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n in [-159, 130]: n1 = floor(n / 2) and n - n1 are both normal exponents
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

inline float exp1(float x) { return _mm256_cvtss_f32(exp8(_mm256_set1_ps(x))); }

// e^x on four lanes in double, relative error below 1e-14 (x clamped to [-150, 90], where fp32
// results are 0 and +inf): n = round(x / ln2), r = x - n ln2 in two constants (|r| <= 0.35), the
// Taylor series of e^r to degree 11 (remainder < 7e-15), times 2^n built in the exponent field.
inline __m256d exp4d(__m256d x) {
  x = _mm256_min_pd(_mm256_max_pd(x, _mm256_set1_pd(-150.0)), _mm256_set1_pd(90.0));
  const __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93147180369123816490e-01), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.90821492927058770002e-10), r);
  static constexpr double kInvFact[12] = {1.0,         1.0,          1.0 / 2,       1.0 / 6,
                                          1.0 / 24,    1.0 / 120,    1.0 / 720,     1.0 / 5040,
                                          1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800};
  __m256d p = _mm256_set1_pd(kInvFact[11]);
  for (int i = 10; i >= 0; --i) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(kInvFact[i]));
  const __m128i ni = _mm256_cvtpd_epi32(n);
  const __m256i e =
      _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(ni), _mm256_set1_epi64x(1023)), 52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

// e^x on eight fp32 lanes, correctly rounded like the reference's fmath::exp (the double result
// is 1e-14 from e^x, so its one rounding to fp32 is the correct one except within 1e-14 of a
// rounding midpoint): what sparse_attn's probabilities use, because their bf16 rounding
// amplifies any one-ulp difference.
inline __m256 exp8_cr(__m256 x) {
  const __m128 lo = _mm256_cvtpd_ps(exp4d(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 hi = _mm256_cvtpd_ps(exp4d(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}
inline float exp1_cr(float x) { return _mm256_cvtss_f32(exp8_cr(_mm256_set1_ps(x))); }

// Round to nearest even bf16 on eight lanes (finite inputs and infinities; like numerics
// round_bf16).
inline __m256 bf16_round8(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
  return _mm256_castsi256_ps(_mm256_and_si256(r, _mm256_set1_epi32(int32_t(0xffff0000u))));
}

inline float bf16_round1(float f) { return _mm256_cvtss_f32(bf16_round8(_mm256_set1_ps(f))); }
inline float bf16_f32(uint16_t b) { return bits_f32(uint32_t(b) << 16); }

// Eight bf16 codes -> fp32.
inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Lane i of the result = the sum of the eight lanes of a[i], every one by the same tree
// ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)), so a sum does not depend on which slot it was given.
inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  // u0 = [a0..a3 low halves | a0..a3 high halves], u1 the same for a4..a7
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// 2^e as fp32 for e >= -149 (subnormal below -126), e <= 127.
inline float pow2f(int e) {
  return e >= -126 ? bits_f32(uint32_t(e + 127) << 23) : bits_f32(1u << (e + 149));
}

// A UE8M0 scale code -> 2^(c - 127) (code 0: 2^-127, subnormal; like fmath::ue8m0).
inline float ue8m0_f32(uint8_t c) { return pow2f(int(c) - 127); }

// An E4M3 code -> its value (exact; the NaN codes are not special-cased: scales never hold them).
inline float e4m3_f32(uint8_t c) {
  const uint32_t e = (c >> 3) & 15u, m = c & 7u;
  const float v = e == 0 ? float(m) * 0x1p-9f : bits_f32(((e + 120u) << 23) | (m << 20));
  return (c & 0x80u) ? -v : v;
}

}  // namespace
}  // namespace cedar::kernels::fast
