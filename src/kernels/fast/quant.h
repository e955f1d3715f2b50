// Vectorized quantizers of the fast tables, bit-exact with the reference (kernel.py act_quant,
// NUMERICS §Q): the same amax, the same power-of-two scale, the same E4M3 round-to-nearest-even
// codes. Eight lanes (V8) in every table: this work is a small share of any forward.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/fast/vec256.h"

namespace cedar::kernels::fast {
namespace {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// NUMERICS §Q fast_round_scale: 2^ceil(log2(f32(amax * inv))) from the fp32 bit pattern.
inline float round_scale(float amax, float inv) {
  const uint32_t b = f32_bits(amax * inv);
  const uint32_t e = (b >> 23) & 0xffu, m = b & 0x7fffffu;
  return bits_f32((e + (m != 0 ? 1u : 0u)) << 23);
}

// |v| <= 448 on eight lanes -> E4M3 codes (int32, sign in bit 7) and the rounded values:
// normal magnitudes round their mantissa to three bits (ties to even) in the integer domain,
// magnitudes below 2^-6 round to a multiple of 2^-9 by the fp32 add of 2^14.
inline __m256 e4m3_round(__m256 v, __m256i* code) {
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
  const __m256i b = _mm256_castps_si256(a);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 20), _mm256_set1_epi32(1));
  __m256i bn = _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7ffff), odd));
  bn = _mm256_and_si256(bn, _mm256_set1_epi32(int32_t(~0xfffffu)));
  const __m256i cn =
      _mm256_min_epi32(_mm256_sub_epi32(_mm256_srli_epi32(bn, 20), _mm256_set1_epi32(0x3c0)),
                       _mm256_set1_epi32(0x7e));
  const __m256 big = _mm256_set1_ps(16384.0f);
  const __m256 vs = _mm256_sub_ps(_mm256_add_ps(a, big), big);
  const __m256i cs = _mm256_cvttps_epi32(_mm256_mul_ps(vs, _mm256_set1_ps(512.0f)));
  const __m256 sub = _mm256_cmp_ps(a, _mm256_set1_ps(0.015625f), _CMP_LT_OQ);
  const __m256i subi = _mm256_castps_si256(sub);
  const __m256i c = _mm256_blendv_epi8(cn, cs, subi);
  *code = _mm256_or_si256(c, _mm256_srli_epi32(_mm256_castps_si256(sign), 24));
  const __m256 rn = _mm256_min_ps(_mm256_castsi256_ps(bn), _mm256_set1_ps(448.0f));
  return _mm256_or_ps(_mm256_blendv_ps(rn, vs, sub), sign);
}

// One 32-block of act_quant: scale code, and (either may be null) the 32 E4M3 codes and the
// dequantized values q * s.
inline uint8_t act_quant_block(const float* x, uint8_t* codes, float* deq) {
  __m256 v[4], m = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    m = _mm256_max_ps(m, V8::abs(v[j]));
  }
  float amax = V8::hmax(m);
  if (!(amax > 1e-4f)) amax = 1e-4f;  // kernel.py clamp_min(1e-4)
  const float s = round_scale(amax, float(1.0 / 448.0));
  const __m256 inv = _mm256_set1_ps(1.0f / s), sv = _mm256_set1_ps(s);  // exact: powers of two
  const __m256 lim = _mm256_set1_ps(448.0f), nlim = _mm256_set1_ps(-448.0f);
  __m256i c[4];
  for (int j = 0; j < 4; ++j) {
    const __m256 q = _mm256_max_ps(_mm256_min_ps(_mm256_mul_ps(v[j], inv), lim), nlim);
    const __m256 r = e4m3_round(q, &c[j]);
    if (deq) _mm256_storeu_ps(deq + 8 * j, _mm256_mul_ps(r, sv));
  }
  if (codes) {
    const __m256i p01 = _mm256_packs_epi32(c[0], c[1]), p23 = _mm256_packs_epi32(c[2], c[3]);
    const __m256i p = _mm256_packus_epi16(p01, p23);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), _mm256_permutevar8x32_epi32(p, order));
  }
  return uint8_t(f32_bits(s) >> 23);
}

// ref: kernel.py act_quant(x, 32) -> E4M3 codes [n], UE8M0 scale codes [n/32]
void act_quant(const float* x, int n, uint8_t* codes, uint8_t* scales) {
  for (int b = 0; b < n / 32; ++b) scales[b] = act_quant_block(x + 32 * b, codes + 32 * b, nullptr);
}

}  // namespace
}  // namespace cedar::kernels::fast
