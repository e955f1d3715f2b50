// V16: sixteen fp32 lanes on AVX-512 (F, DQ), the vector layer of the avx512 table's GEMMs.
//
// The weight decoders are V8's (256-bit shuffles, the code the avx2 table runs on every AVX2
// machine) with pairs of results joined into one 512-bit register: the only AVX-512 operations
// in cedar are loads, stores, FMAs, adds, multiplies and these joins, which keeps what a machine
// without AVX-512 cannot test to the simplest instructions. Wider native decoders (and the
// VNNI/BF16 dot products) are left for a session on an AVX-512 machine.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/fast/vec256.h"

namespace cedar::kernels::fast {
namespace {

struct V16 {
  using F = __m512;
  static constexpr int N = 16;
  static constexpr int kBlockVecs = 32 / N;

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }

  // the low half first, then V8's fixed tree on the sum of the halves
  static float hsum(F v) {
    return V8::hsum(_mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1)));
  }
  static float hmax(F v) {
    return V8::hmax(_mm256_max_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1)));
  }

  // (GCC 12's cast/zero-extend intrinsics warn about their undefined upper half: insert twice)
  static F join(__m256 lo, __m256 hi) {
    return _mm512_insertf32x8(_mm512_insertf32x8(_mm512_setzero_ps(), lo, 0), hi, 1);
  }
  static void join_block(const __m256* h, F* out) {
    out[0] = join(h[0], h[1]);
    out[1] = join(h[2], h[3]);
  }
  static void dec_e4m3_bits(const uint8_t* p, F* out) {
    __m256 h[4];
    V8::dec_e4m3_bits(p, h);
    join_block(h, out);
  }
  static void dec_e2m1_pair(const uint8_t* p, bool pair, const uint8_t* t0, const uint8_t* t1,
                            F* out) {
    __m256 h[8];
    V8::dec_e2m1_pair(p, pair, t0, t1, h);
    for (int j = 0; j < 4; ++j) out[j] = join(h[2 * j], h[2 * j + 1]);
  }
  static void fma_e2m1_pair(const uint8_t* p, bool pair, const uint8_t* t0, const uint8_t* t1,
                            const float* x, F* acc) {
    F w[4];
    dec_e2m1_pair(p, pair, t0, t1, w);
    for (int j = 0; j < 4; ++j) acc[j % 2] = fma(load(x + 16 * j), w[j], acc[j % 2]);
  }
  static void dec_bf16(const uint16_t* p, F* out) {
    __m256 h[4];
    V8::dec_bf16(p, h);
    join_block(h, out);
  }
  static void dec_q8b(const uint8_t* p, float s, F* out) {
    __m256 h[4];
    V8::dec_q8b(p, s, h);
    join_block(h, out);
  }
};

}  // namespace
}  // namespace cedar::kernels::fast
