// The bf16 product with lanes over outputs (kernel_table.h bf16_lanes): a short-K weight kept in
// pack_bf16_lanes' layout, 16 outputs per vector, so an output is never reduced across lanes.
//
// Why: the default model's head has K = 128 (its Markov head 16, zero-padded to 32 by DSpark).
// With lanes along K, each of its 38,027 outputs per row ends in a 16-lane horizontal sum that
// costs more than its four VDPBF16PS (docs/KERNELS.md: ~10 cycles per output, reducing 16 outputs
// together was slower). Here a pair j of K is one broadcast of the row's two words against one
// vector of 16 outputs' words j, so an output costs K/2 lane-operations and nothing after; the rows
// of a call (a draft's 5, a verify pass's 6) share every weight load.
//
// Arithmetic per output, the same for every row count, tile and thread split (batch invariance):
// from +0, pair by pair in order j = 0 .. K/2-1,
// * Dp (avx512bf16): acc = VDPBF16PS(acc, w pair j, x pair j); the activations are bf16 values
//   (kernel_table.h), so the pair's words are exact;
// * Fma (avx512, avx2): acc = fma(w[2j], x[2j], acc), then fma(w[2j+1], x[2j+1], acc) -- the
//   same bits in both tables (a 16-output group is one zmm or two ymm lanes-wise).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "base/scratch.h"
#include "kernels/fast/gemm.h"

namespace cedar::kernels::fast {
namespace {

// Tiles: M rows x G groups of accumulators; enough independent chains to cover the
// instruction's latency at one row, few enough to stay in registers at four.
constexpr int kLanesRowsPerTile = 4;

// The vector layers: a 16-output group as N-lane vectors (kSub = 16 / N of them); load() reads
// a group's words of one pair once for every row of a tile, step() adds one row's pair products.
#if defined(__AVX512BF16__)
struct LanesDp {
  static constexpr int kSub = 1, kGroups1 = 8, kGroups4 = 4;
  using F = __m512;
  using W = __m512i;
  static F zero() { return _mm512_setzero_ps(); }
  static W load(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void step(const W& w, uint32_t xw, const float*, F* acc) {
    acc[0] = _mm512_dpbf16_ps(acc[0], __m512bh(w), __m512bh(_mm512_set1_epi32(int(xw))));
  }
  static void store(float* out, const F* acc) { _mm512_storeu_ps(out, acc[0]); }
};
#endif

#if defined(__AVX512F__)
struct LanesFma16 {
  static constexpr int kSub = 1, kGroups1 = 8, kGroups4 = 4;
  using F = __m512;
  struct W {
    __m512 even, odd;  // words 2j and 2j + 1 of the 16 outputs, as floats
  };
  static F zero() { return _mm512_setzero_ps(); }
  static W load(const uint32_t* p) {
    const __m512i w = _mm512_loadu_si512(p);
    // (the masked shift: GCC 12 warns about the plain one's undefined pass-through operand)
    return {_mm512_castsi512_ps(_mm512_mask_slli_epi32(w, __mmask16(0xffff), w, 16)),
            _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(-65536)))};
  }
  static void step(const W& w, uint32_t, const float* x2, F* acc) {
    acc[0] = _mm512_fmadd_ps(w.even, _mm512_set1_ps(x2[0]), acc[0]);
    acc[0] = _mm512_fmadd_ps(w.odd, _mm512_set1_ps(x2[1]), acc[0]);
  }
  static void store(float* out, const F* acc) { _mm512_storeu_ps(out, acc[0]); }
};
#endif

// (sixteen ymm registers: the words stay packed until a row uses them)
struct LanesFma8 {
  static constexpr int kSub = 2, kGroups1 = 2, kGroups4 = 1;
  using F = __m256;
  struct W {
    __m256i lo, hi;  // outputs 0-7 and 8-15
  };
  static F zero() { return _mm256_setzero_ps(); }
  static W load(const uint32_t* p) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
  }
  static void step(const W& w, uint32_t, const float* x2, F* acc) {
    const __m256 x0 = _mm256_set1_ps(x2[0]), x1 = _mm256_set1_ps(x2[1]);
    const __m256i mask = _mm256_set1_epi32(-65536);
    const __m256i half[2] = {w.lo, w.hi};
    CEDAR_UNROLL for (int s = 0; s < 2; ++s) {
      acc[s] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(half[s], 16)), x0, acc[s]);
      acc[s] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(half[s], mask)), x1, acc[s]);
    }
  }
  static void store(float* out, const F* acc) {
    _mm256_storeu_ps(out, acc[0]);
    _mm256_storeu_ps(out + 8, acc[1]);
  }
};

// M rows x G groups starting at group g of the packed weight (P pairs per group): xw [M][P] the
// rows' pair words, x the rows as floats (ldx apart), out rows ldo apart at the groups' first
// output.
template <class L, int M, int G>
inline void lanes_tile(const uint32_t* packed, int P, const uint32_t* xw, const float* x, int ldx,
                       float* out, int ldo) {
  typename L::F acc[M][G][L::kSub];
  CEDAR_UNROLL for (int i = 0; i < M; ++i) {
    CEDAR_UNROLL for (int g = 0; g < G; ++g) {
      CEDAR_UNROLL for (int s = 0; s < L::kSub; ++s) acc[i][g][s] = L::zero();
    }
  }
  for (int j = 0; j < P; ++j) {
    typename L::W w[G];
    CEDAR_UNROLL for (int g = 0; g < G; ++g) {
      w[g] = L::load(packed + (size_t(g) * size_t(P) + size_t(j)) * 16);
    }
    CEDAR_UNROLL for (int i = 0; i < M; ++i) {
      CEDAR_UNROLL for (int g = 0; g < G; ++g) {
        L::step(w[g], xw[size_t(i) * P + j], x + size_t(i) * ldx + 2 * j, acc[i][g]);
      }
    }
  }
  CEDAR_UNROLL for (int i = 0; i < M; ++i) {
    CEDAR_UNROLL for (int g = 0; g < G; ++g) L::store(out + size_t(i) * ldo + 16 * g, acc[i][g]);
  }
}

// rows [i0, i0 + M) against groups [g0, g1): G groups per tile, then one at a time
template <class L, int M, int G>
void lanes_rows(const uint32_t* packed, int P, int g0, int g1, const uint32_t* xw, const float* x,
                int ldx, float* out, int ldo) {
  int g = g0;
  for (; g + G <= g1; g += G)
    lanes_tile<L, M, G>(packed + size_t(g) * P * 16, P, xw, x, ldx, out + 16 * size_t(g), ldo);
  for (; g < g1; ++g)
    lanes_tile<L, M, 1>(packed + size_t(g) * P * 16, P, xw, x, ldx, out + 16 * size_t(g), ldo);
}

// kernel_table.h bf16_lanes
template <class L>
void bf16_lanes(const uint32_t* packed, int K, int g0, int g1, const float* x, int m, int ldx,
                float* out, int ldo) {
  const int P = K / 2;
  // the rows' pair words: each float holds a bf16 value, so its high half is the word
  Scratch<uint32_t> xw(size_t(m) * size_t(P));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < P; ++j) {
      uint32_t lo, hi;
      std::memcpy(&lo, x + size_t(i) * ldx + 2 * j, 4);
      std::memcpy(&hi, x + size_t(i) * ldx + 2 * j + 1, 4);
      xw[size_t(i) * P + j] = (lo >> 16) | (hi & 0xffff0000u);
    }
  // a block of groups at a time, every row over it, so the block's weight is read from the
  // cache by the rows after the first
  constexpr int kBlock = 16;
  for (int b0 = g0; b0 < g1; b0 += kBlock) {
    const int b1 = b0 + kBlock < g1 ? b0 + kBlock : g1;
    int i = 0;
    for (; i + kLanesRowsPerTile <= m; i += kLanesRowsPerTile)
      lanes_rows<L, 4, L::kGroups4>(packed, P, b0, b1, xw.data() + size_t(i) * P,
                                    x + size_t(i) * ldx, ldx, out + size_t(i) * ldo, ldo);
    const uint32_t* xr = xw.data() + size_t(i) * P;
    const float* xf = x + size_t(i) * ldx;
    float* o = out + size_t(i) * ldo;
    switch (m - i) {
      case 1:
        lanes_rows<L, 1, L::kGroups1>(packed, P, b0, b1, xr, xf, ldx, o, ldo);
        break;
      case 2:
        lanes_rows<L, 2, L::kGroups1>(packed, P, b0, b1, xr, xf, ldx, o, ldo);
        break;
      case 3:
        lanes_rows<L, 3, L::kGroups4>(packed, P, b0, b1, xr, xf, ldx, o, ldo);
        break;
      default:
        break;
    }
  }
}

}  // namespace
}  // namespace cedar::kernels::fast
