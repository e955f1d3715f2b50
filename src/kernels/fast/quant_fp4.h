// Vectorized FP4 quantizers of the fast tables, bit-exact with the reference (kernel.py
// fp4_act_quant, NUMERICS §Q): the same amax and floor, the same scale (fp32 division by 6 then
// E4M3 RNE, or the power-of-two fast_round_scale), the same fp32 division x / s (true division:
// _mm256_div_ps is correctly rounded like the scalar one), the same E2M1 ties-to-even codes.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/quant.h"
#include "kernels/fast/vec256.h"

namespace cedar::kernels::fast {
namespace {

// One rounding midpoint of E2M1: lanes with |v| past it (kCmp: > or >=) count one more code.
template <int kCmp>
inline __m256i passed(__m256i c, __m256 a, float mid) {
  return _mm256_sub_epi32(c, _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(mid), kCmp)));
}

// x / s clamped to [-6, 6] -> E2M1 codes (int32 lanes, sign in bit 3). ref: numerics
// f32_to_e2m1: the code is the number of rounding midpoints |v| has passed; at the midpoints
// 0.75, 1.75 and 3.5 the upper (even) code wins, at 0.25, 1.25, 2.5 and 5 the lower one.
inline __m256i e2m1_codes(__m256 x, __m256 s) {
  __m256 v = _mm256_div_ps(x, s);
  v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-6.0f)), _mm256_set1_ps(6.0f));
  const __m256 a = V8::abs(v);
  __m256i c = _mm256_setzero_si256();
  c = passed<_CMP_GT_OQ>(c, a, 0.25f);
  c = passed<_CMP_GE_OQ>(c, a, 0.75f);
  c = passed<_CMP_GT_OQ>(c, a, 1.25f);
  c = passed<_CMP_GE_OQ>(c, a, 1.75f);
  c = passed<_CMP_GT_OQ>(c, a, 2.5f);
  c = passed<_CMP_GE_OQ>(c, a, 3.5f);
  c = passed<_CMP_GT_OQ>(c, a, 5.0f);
  // the sign bit of v (-0 too, like std::signbit) -> bit 3
  const __m256i sign = _mm256_srli_epi32(_mm256_castps_si256(v), 28);
  return _mm256_or_si256(c, _mm256_and_si256(sign, _mm256_set1_epi32(8)));
}

// 16 E2M1 codes (two int32 vectors, elements in order) -> 8 packed bytes (element 2j in the low
// nibble of byte j).
inline void pack_e2m1_16(__m256i c0, __m256i c1, uint8_t* out) {
  // words [0..3, 8..11 | 4..7, 12..15], then bytes; the dword permute puts 0..15 in order
  const __m256i w = _mm256_packs_epi32(c0, c1);
  const __m256i b = _mm256_packus_epi16(w, w);
  const __m256i ordered = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0));
  const __m128i x = _mm256_castsi256_si128(ordered);  // codes 0..15, one per byte
  // word j = code[2j] | code[2j+1] << 8 -> code[2j] | code[2j+1] << 4 in its low byte
  const __m128i t = _mm_and_si128(_mm_or_si128(x, _mm_srli_epi16(x, 4)), _mm_set1_epi16(0x00ff));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(t, t));
}

inline float block_amax16(const float* x, __m256* v) {
  v[0] = _mm256_loadu_ps(x);
  v[1] = _mm256_loadu_ps(x + 8);
  return V8::hmax(_mm256_max_ps(V8::abs(v[0]), V8::abs(v[1])));
}

// ref: kernel.py fp4_act_quant(x, 16, scale_dtype=e4m3) -> packed E2M1 [n/2], E4M3 scales [n/16]
void fp4_act_quant_e4m3(const float* x, int n, uint8_t* packed, uint8_t* scales) {
  const float floor_amax = 6.0f * 0x1p-9f;  // exact in fp32
  for (int b = 0; b < n / 16; ++b) {
    __m256 v[2];
    float amax = block_amax16(x + 16 * b, v);
    if (!(amax > floor_amax)) amax = floor_amax;
    // s = E4M3(f32(amax / 6)), saturating at 448 like ref e4m3_rne
    const float t = amax / 6.0f;
    __m256i code;
    const __m256 s = e4m3_round(_mm256_min_ps(_mm256_set1_ps(t), _mm256_set1_ps(448.0f)), &code);
    scales[b] = uint8_t(_mm256_cvtsi256_si32(code));
    pack_e2m1_16(e2m1_codes(v[0], s), e2m1_codes(v[1], s), packed + 8 * b);
  }
}

// ref: kernel.py fp4_act_quant(x, 32) with UE8M0 scales -> packed E2M1 [n/2], UE8M0 [n/32]
void fp4_act_quant_ue8m0(const float* x, int n, uint8_t* packed, uint8_t* scales) {
  const float floor_amax = 6.0f * 0x1p-126f;
  for (int b = 0; b < n / 32; ++b) {
    __m256 v[4];
    const float a0 = block_amax16(x + 32 * b, v), a1 = block_amax16(x + 32 * b + 16, v + 2);
    float amax = a0 > a1 ? a0 : a1;
    if (!(amax > floor_amax)) amax = floor_amax;
    const float s = round_scale(amax, float(1.0 / 6.0));
    scales[b] = uint8_t(f32_bits(s) >> 23);
    const __m256 sv = _mm256_set1_ps(s);
    pack_e2m1_16(e2m1_codes(v[0], sv), e2m1_codes(v[1], sv), packed + 16 * b);
    pack_e2m1_16(e2m1_codes(v[2], sv), e2m1_codes(v[3], sv), packed + 16 * b + 8);
  }
}

}  // namespace
}  // namespace cedar::kernels::fast
