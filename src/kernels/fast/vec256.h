// V8: eight fp32 lanes on AVX2 + FMA + F16C, the vector layer of the fast kernels
// (kernels/fast/*.h are templates over a V like this one).
//
// Included only by kernel translation units compiled with at least these flags
// (kernels/<isa>/<isa>.cpp). Like every kernels/fast header it puts everything in an anonymous
// namespace: each ISA TU gets its own private copy compiled with its own flags, so no copy built
// for a wider ISA can be linked into code that runs on a narrower CPU. For the same reason these
// headers include no header with external inline functions (only intrinsics and <cstdint>).
//
// The weight decoders turn one unit of a stored row (a 32-element K block; two for FP4) into
// exact fp32 values, in a lane order of their own choosing (whatever the cheapest shuffles give).
// The fast GEMM families learn that order by decoding synthetic blocks (fast/gemm.h block_order)
// and store activation rows in it, so the order is never written down twice.
#pragma once

#include <immintrin.h>

#include <cstdint>

#define CEDAR_VEC_UNROLL _Pragma("GCC unroll 8")

namespace cedar::kernels::fast {
namespace {

struct V8 {
  using F = __m256;
  static constexpr int N = 8;
  static constexpr int kBlockVecs = 32 / N;  // vectors per 32-element block

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, one rounding
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F abs(F a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }

  // Horizontal sum in a fixed tree: ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)).
  static float hsum(F v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }
  static float hmax(F v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_shuffle_ps(s, s, 1));
    return _mm_cvtss_f32(s);
  }

  // 32 E4M3 codes -> their values times 2^-8 (exact): the code's sign, exponent and mantissa
  // placed in an fp16 (sign | code<<7 is E4M3 re-biased by 2^-8, subnormals included), then F16C.
  static void dec_e4m3(const uint8_t* p, F* out) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i z = _mm256_setzero_si256(), mask = _mm256_set1_epi16(int16_t(0xBF80));
    // words (code << 8); the arithmetic shift copies the sign into bit 14, the mask clears it
    const __m256i lo = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpacklo_epi8(z, b), 1), mask);
    const __m256i hi = _mm256_and_si256(_mm256_srai_epi16(_mm256_unpackhi_epi8(z, b), 1), mask);
    out[0] = _mm256_cvtph_ps(_mm256_castsi256_si128(lo));
    out[1] = _mm256_cvtph_ps(_mm256_castsi256_si128(hi));
    out[2] = _mm256_cvtph_ps(_mm256_extracti128_si256(lo, 1));
    out[3] = _mm256_cvtph_ps(_mm256_extracti128_si256(hi, 1));
  }

  // 32 E4M3 codes -> fp32 bit patterns worth value x 2^-120 (exact: the code's exponent and
  // mantissa land in the low exponent bits and the top mantissa bits, so exponent 0 gives the
  // fp32 subnormal that E4M3's subnormal is, scaled). Shifts only, no conversion: the GEMV's
  // decoder (fast/gemm.h folds 2^120 into the activations). Lane order: slot 8k + i of out
  // holds element 4i + k.
  static void dec_e4m3_bits(const uint8_t* p, F* out) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i m = _mm256_set1_epi32(int32_t(0x87F00000u));  // sign, 4+3 code bits
    // byte k of each dword to the top, then the arithmetic shift copies the sign down 4 bits
    // (the mask keeps only bit 31 of those copies)
    const __m256i v[4] = {_mm256_slli_epi32(b, 24), _mm256_slli_epi32(b, 16),
                          _mm256_slli_epi32(b, 8), b};
    CEDAR_VEC_UNROLL for (int k = 0; k < 4; ++k) out[k] =
        _mm256_castsi256_ps(_mm256_and_si256(_mm256_srai_epi32(v[k], 4), m));
  }

  // 64 elements (two 32-blocks of packed E2M1: 32 bytes, or 16 when `pair` is false and the
  // second block is absent and reads as zeros) -> the E2M1 values times their block scales:
  // exact. t0 and t1 (32 bytes each: 16 high bytes, then 16 low bytes) give the bf16 of code
  // c's value times the block's scale -- such a product has at most two significant bits, so
  // bf16 holds it exactly and fp32 is a 16-bit shift or mask away: a table lookup per nibble
  // does the decode and the scaling (fast/gemm.h builds the tables per scale code).
  // Lane order: each 128-bit half of out[j] holds one block (low half the first).
  static void dec_e2m1_pair(const uint8_t* p, bool pair, const uint8_t* t0, const uint8_t* t1,
                            F* out) {
    e2m1_pair(p, pair, t0, t1, out, nullptr, nullptr);
  }
  // acc + the dot product of the 64 decoded values with x[0, 64) (in the decoders' order): one
  // FMA per vector as soon as it is decoded, so a GEMV keeps its accumulators in registers.
  // The even vectors go to acc[0], the odd ones to acc[1]: two dependency chains.
  static void fma_e2m1_pair(const uint8_t* p, bool pair, const uint8_t* t0, const uint8_t* t1,
                            const float* x, F* acc) {
    e2m1_pair(p, pair, t0, t1, nullptr, x, acc);
  }
  static void e2m1_pair(const uint8_t* p, bool pair, const uint8_t* t0, const uint8_t* t1, F* out,
                        const float* x, F* acc) {
    const __m256i b =
        pair ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
             : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i nib = _mm256_set1_epi8(0x0F);
    const __m256i hi = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(t1),
                                           reinterpret_cast<const __m128i*>(t0));
    const __m256i lo = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(t1 + 16),
                                           reinterpret_cast<const __m128i*>(t0 + 16));
    const __m256i top = _mm256_set1_epi32(int32_t(0xFFFF0000u));
    const __m256i idx[2] = {_mm256_and_si256(b, nib),
                            _mm256_and_si256(_mm256_srli_epi16(b, 4), nib)};
    CEDAR_VEC_UNROLL for (int h = 0; h < 2; ++h) {
      const __m256i bh = _mm256_shuffle_epi8(hi, idx[h]), bl = _mm256_shuffle_epi8(lo, idx[h]);
      CEDAR_VEC_UNROLL for (int q = 0; q < 2; ++q) {
        const __m256i w = q == 0 ? _mm256_unpacklo_epi8(bl, bh) : _mm256_unpackhi_epi8(bl, bh);
        const int j = 4 * h + 2 * q;
        const F v0 = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
        const F v1 = _mm256_castsi256_ps(_mm256_and_si256(w, top));
        if (out) {
          out[j] = v0;
          out[j + 1] = v1;
        } else {
          acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8 * j), v0, acc[0]);
          acc[1] = _mm256_fmadd_ps(_mm256_loadu_ps(x + 8 * j + 8), v1, acc[1]);
        }
      }
    }
  }

  // 32 bf16 -> fp32: the even element of each 32-bit pair shifted up, the odd one masked.
  static void dec_bf16(const uint16_t* p, F* out) {
    const __m256i hi_mask = _mm256_set1_epi32(int32_t(0xFFFF0000u));
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
    out[0] = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
    out[1] = _mm256_castsi256_ps(_mm256_and_si256(a, hi_mask));
    out[2] = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
    out[3] = _mm256_castsi256_ps(_mm256_and_si256(b, hi_mask));
  }
  // 32 Q8B codes (numerics/q8b.h: sign-magnitude int8) -> q x s in element order (exact: 7 + 8
  // significant bits)
  // (the codes become two's complement bytes first -- |q| negated where the sign bit is set, by
  // VPSIGNB, which gives the code -0 as +0: no sum differs, every accumulator starts at +0 --
  // then widen, convert, scale)
  static void dec_q8b(const uint8_t* p, float s, F* out) {
    const __m256 sv = _mm256_set1_ps(s);
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i q = _mm256_sign_epi8(_mm256_and_si256(b, _mm256_set1_epi8(0x7F)), b);
    const __m128i half[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int j = 0; j < 4; ++j) {
      const __m128i h = j % 2 ? _mm_srli_si128(half[j / 2], 8) : half[j / 2];
      out[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h)), sv);
    }
  }
};

}  // namespace
}  // namespace cedar::kernels::fast
